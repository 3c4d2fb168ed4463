// Helpers for the format tests: a tiny spec-following GGUF/safetensors byte builder (independent of
// the writers under test) and an expectation that a call throws oxi::Error with a one-line message.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"

namespace oxi::test {

struct Bytes {
  std::vector<uint8_t> b;
  template <class T>
  Bytes& pod(T x) {
    const size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &x, sizeof(T));
    return *this;
  }
  Bytes& u8(uint8_t x) { return pod(x); }
  Bytes& u32(uint32_t x) { return pod(x); }
  Bytes& u64(uint64_t x) { return pod(x); }
  Bytes& i32(int32_t x) { return pod(x); }
  Bytes& f32(float x) { return pod(x); }
  Bytes& raw(const std::string& s) {
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& str(const std::string& s) { return u64(s.size()).raw(s); }
  Bytes& pad_to(size_t align) {
    while (b.size() % align) b.push_back(0);
    return *this;
  }
  Bytes& zeros(size_t n) {
    b.resize(b.size() + n, 0);
    return *this;
  }
};

// Runs f; passes if it throws oxi::Error whose message is one non-empty line.
inline ::testing::AssertionResult throws_clean(const std::function<void()>& f, std::string* msg = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    const std::string m = e.what();
    if (msg) *msg = m;
    if (m.empty()) return ::testing::AssertionFailure() << "empty message";
    if (m.find('\n') != std::string::npos) return ::testing::AssertionFailure() << "multi-line: " << m;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "non-oxi exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

}  // namespace oxi::test
