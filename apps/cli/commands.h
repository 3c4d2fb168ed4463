// One function per subcommand, each in its own cmd_<name>.cpp. argv[0] is the subcommand name.
#pragma once

namespace oxi::cli {

int cmd_inspect(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_chat(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_convert(int argc, char** argv);
int cmd_quantize(int argc, char** argv);
int cmd_pull(int argc, char** argv);
int cmd_list(int argc, char** argv);  // cmd_models.cpp
int cmd_rm(int argc, char** argv);    // cmd_models.cpp

}  // namespace oxi::cli
