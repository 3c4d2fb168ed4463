#include <gtest/gtest.h>

#include "chat/jinja.h"

TEST(JinjaSmoke, Basic) {
  oxi::ChatTemplate t("{% for x in xs %}{{ x }},{% endfor %}");
  nlohmann::ordered_json ctx = {{"xs", {1, 2, 3}}};
  EXPECT_EQ(t.render(ctx), "1,2,3,");
}
