// A read-only, random-access view of a file's bytes. Native builds map the file (weights are read
// in place, never copied); wasm builds hold the bytes in memory (the browser hands us a buffer, and
// emscripten 3.1.6 has no useful mmap). Loaders only see data()/size(), so they work on both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace oxi {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Whole contents; valid while the ByteSource lives. Never null (an empty source has size 0 and a
  // non-null pointer).
  virtual const uint8_t* data() const = 0;
  virtual uint64_t size() const = 0;
  // The path or a label, used in every error message about this source.
  const std::string& name() const { return name_; }

  // Bounds-checked sub-range: throws a format error naming this source if [offset, offset+len)
  // is not inside it. Written to be overflow-safe for hostile offsets.
  const uint8_t* range(uint64_t offset, uint64_t len) const;

  // Hint that [offset, offset + len) will not be read again soon (e.g. a weight that was just
  // quantised into memory at load): a mapped file drops the whole pages inside the range from the
  // process's resident set (madvise; the page cache keeps them and a later read faults them back
  // in, so the bytes stay valid). In-memory sources ignore it.
  virtual void release(uint64_t offset, uint64_t len) const {
    (void)offset;
    (void)len;
  }

 protected:
  explicit ByteSource(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};

using ByteSourcePtr = std::shared_ptr<const ByteSource>;

// Opens a file read-only: mmap where available, else reads it whole. Throws oxi::Error(kIo).
ByteSourcePtr open_file_source(const std::string& path);
// Process-wide: false makes open_file_source read files into memory instead of mapping them
// (llama.cpp's --no-mmap: the weights then count in the process's memory, nothing is paged back
// from the file). Default true.
void set_use_mmap(bool use);
// Wraps an in-memory buffer (moved in).
ByteSourcePtr memory_source(std::vector<uint8_t> bytes, std::string name);

// The same hint by address: if [p, p + n) lies inside a file mapped by open_file_source that is
// still open, its whole pages are dropped from the resident set as ByteSource::release does;
// any other memory (heap, a closed file's former range) is left alone. Returns whether it was a
// mapped file. Used by kernels/pack.cpp, which only sees weight pointers.
bool release_mapped_range(const void* p, uint64_t n);

// "" normally; the name of a mapped file that was truncated on disk while mapped, once a read
// touched a page past its new end (that read saw zeros instead of crashing with SIGBUS; the
// results computed from it are garbage, so callers must fail). Stays set for the process.
std::string damaged_mapped_file();

// Reads a whole (small) text file, e.g. config.json. Throws oxi::Error(kIo) with the path.
std::string read_text_file(const std::string& path, uint64_t max_bytes = 256ull << 20);
// Writes via a temp file next to `path` then rename, so a failure never leaves a partial file.
// The temp file ("<path>.tmp.<pid>.<random>") is created with O_CREAT | O_EXCL | O_NOFOLLOW: a
// file or symlink planted at its name (issue 29 #10: a symlink at the once predictable
// "<path>.tmp.<pid>" made `convert` overwrite its target) is never opened; another name is tried.
void write_file_atomic(const std::string& path, const void* data, size_t n);
// The same with the content written by `fill` (which throws on a failed write).
void write_file_atomic(const std::string& path, const std::function<void(std::FILE*)>& fill);

}  // namespace oxi
