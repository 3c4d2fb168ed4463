// The connection layer in front of cpp-httplib's request handling (docs/server.md "Hardening
// limits"). cpp-httplib 0.11 gives each accepted connection a worker thread for its whole life,
// with no deadline on the request head, so idle or slow connections hold every worker. Here:
//   * one gate thread reads the request head of every new connection (poll, non-blocking) with a
//     deadline; only a connection whose head has fully arrived reaches a worker;
//   * the gate holds at most max_pending connections (the oldest is dropped for a new one);
//   * GET/HEAD/OPTIONS (health, models, metrics) have their own small pool, so /health answers
//     while every generation worker is busy; a full work queue is refused at once with a 503;
//   * reads have a per-read idle timeout and a whole-request deadline, writes a per-write timeout;
//   * one request per connection (Connection: close): an idle keep-alive connection never sits
//     on a worker;
//   * no SO_REUSEPORT (a busy port is an error), listen backlog 512.
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace oxi::server {

struct FrontLimits {
  int head_timeout_ms = 10000;      // accept → request head complete
  int request_timeout_ms = 120000;  // accept → body fully read
  int read_idle_timeout_ms = 10000; // no byte for this long while reading → drop
  int write_timeout_ms = 10000;     // one blocked write (a client that stopped reading)
  size_t max_head_bytes = 32768;    // request line + headers → 431 beyond
  size_t max_pending = 1024;        // connections waiting for their head
  size_t workers = 64;              // POST handlers (generation requests wait here for a slot)
  size_t light_workers = 4;         // GET / HEAD / OPTIONS
  size_t max_queued = 1024;         // complete requests waiting for a worker → 503 beyond
  int backlog = 512;
};

// True once the client of the request being handled on this thread has closed or reset its
// connection (checked with poll at most every 50 ms; false outside a request).
bool client_disconnected();

// When the connection of the request being handled on this thread was accepted (for the request
// log's duration).
std::chrono::steady_clock::time_point request_accepted();

class FrontServer : public httplib::Server {
 public:
  explicit FrontServer(FrontLimits limits = {});
  ~FrontServer() override;

  // bind_to_port with our socket options and backlog; false if the address is unavailable.
  bool bind(const std::string& host, int port);
  // Runs until stop(); then stops the gate and the workers (running requests finish first).
  bool run();

  struct Conn;  // one accepted connection (http_front.cpp)

 private:
  class Pool;

  bool process_and_close_socket(socket_t sock) override;
  void gate_loop();
  void dispatch(std::unique_ptr<Conn> c);
  void serve(Conn& c);
  void shutdown_front();

  FrontLimits lim_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Conn>> incoming_;
  bool stopping_ = false;
  int wake_[2] = {-1, -1};
  std::thread gate_;
  std::unique_ptr<Pool> heavy_, light_;
};

}  // namespace oxi::server
