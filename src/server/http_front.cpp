#include "server/http_front.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace oxi::server {

namespace {

using Clock = std::chrono::steady_clock;

int ms_until(Clock::time_point t, Clock::time_point now) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - now).count();
  return ms <= 0 ? 0 : static_cast<int>(std::min<long long>(ms, 1 << 30));
}

// The connection the request handled on this thread came on (for client_disconnected()).
thread_local int tl_fd = -1;
thread_local bool tl_gone = false;
thread_local Clock::time_point tl_last_check{};
thread_local Clock::time_point tl_accepted{};

void set_nonblocking(int fd) {
  const int fl = fcntl(fd, F_GETFL, 0);
  if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

// A short response written without waiting (best effort) before the connection is dropped.
void reply_and_close(int fd, int status, const char* reason, const char* message) {
  const std::string body = std::string("{\"error\":{\"message\":\"") + message +
                           "\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":" +
                           std::to_string(status) + "}}";
  const std::string r = "HTTP/1.1 " + std::to_string(status) + " " + reason +
                        "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                        "\r\nConnection: close\r\n\r\n" + body;
  (void)!send(fd, r.data(), r.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  shutdown(fd, SHUT_RDWR);
  close(fd);
}

void ip_and_port(const sockaddr_storage& ss, std::string& ip, int& port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
    port = ntohs(a->sin6_port);
  }
  ip = buf;
}

// Runs the accepted socket's processing inline on the accept thread: that only hands the
// socket to the gate (FrontServer::process_and_close_socket), which never blocks.
class InlineQueue : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

}  // namespace

Clock::time_point request_accepted() { return tl_accepted; }

bool client_disconnected() {
  if (tl_fd < 0) return false;
  if (tl_gone) return true;
  const auto now = Clock::now();
  if (now - tl_last_check < std::chrono::milliseconds(50)) return false;
  tl_last_check = now;
  pollfd p{tl_fd, POLLRDHUP, 0};
  if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) tl_gone = true;
  return tl_gone;
}

struct FrontServer::Conn {
  int fd = -1;
  Clock::time_point accepted;
  std::string buf;   // bytes read by the gate: the request head (and maybe the start of the body)
  size_t pos = 0;    // how much of buf the request parser has consumed
  size_t scanned = 0;
};

// Reads serve the gate's buffered bytes first; every read and write has a deadline.
class FrontStream : public httplib::Stream {
 public:
  FrontStream(FrontServer::Conn& c, const FrontLimits& lim)
      : c_(c), lim_(lim), deadline_(c.accepted + std::chrono::milliseconds(lim.request_timeout_ms)) {}

  bool is_readable() const override { return c_.pos < c_.buf.size() || wait(POLLIN, read_wait_ms()) > 0; }
  bool is_writable() const override { return wait(POLLOUT, lim_.write_timeout_ms) > 0; }

  ssize_t read(char* ptr, size_t size) override {
    if (c_.pos < c_.buf.size()) {
      const size_t n = std::min(size, c_.buf.size() - c_.pos);
      std::memcpy(ptr, c_.buf.data() + c_.pos, n);
      c_.pos += n;
      if (c_.pos == c_.buf.size()) {
        c_.buf.clear();
        c_.buf.shrink_to_fit();
        c_.pos = 0;
      }
      return static_cast<ssize_t>(n);
    }
    for (;;) {
      const ssize_t n = recv(c_.fd, ptr, size, 0);
      if (n >= 0) return n;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      const int w = read_wait_ms();
      if (w <= 0 || wait(POLLIN, w) <= 0) return -1;  // idle or past the request deadline
    }
  }

  ssize_t write(const char* ptr, size_t size) override {
    for (;;) {
      const ssize_t n = send(c_.fd, ptr, size, MSG_NOSIGNAL);
      if (n >= 0) return n;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      if (wait(POLLOUT, lim_.write_timeout_ms) <= 0) return -1;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (getpeername(c_.fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) ip_and_port(ss, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (getsockname(c_.fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) ip_and_port(ss, ip, port);
  }
  socket_t socket() const override { return c_.fd; }

 private:
  int read_wait_ms() const { return std::min(lim_.read_idle_timeout_ms, ms_until(deadline_, Clock::now())); }
  int wait(short events, int ms) const {
    pollfd p{c_.fd, events, 0};
    for (;;) {
      const int r = poll(&p, 1, ms);
      if (r < 0 && errno == EINTR) continue;
      if (r > 0 && (p.revents & (POLLERR | POLLNVAL))) return -1;
      return r;
    }
  }

  FrontServer::Conn& c_;
  const FrontLimits& lim_;
  Clock::time_point deadline_;
};

class FrontServer::Pool {
 public:
  Pool(FrontServer& owner, size_t n, size_t max_queued) : owner_(owner), max_queued_(max_queued) {
    for (size_t i = 0; i < n; ++i) threads_.emplace_back([this] { work(); });
  }
  ~Pool() { stop(); }

  // False when the queue is full (the caller refuses the connection).
  bool push(std::unique_ptr<Conn>& c) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stop_ || q_.size() >= max_queued_) return false;
      q_.push_back(std::move(c));
    }
    cv_.notify_one();
    return true;
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
    threads_.clear();
    for (auto& c : q_) reply_and_close(c->fd, 503, "Service Unavailable", "server is shutting down");
    q_.clear();
  }

 private:
  void work() {
    for (;;) {
      std::unique_ptr<Conn> c;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stop_ || !q_.empty(); });
        if (stop_) return;
        c = std::move(q_.front());
        q_.pop_front();
      }
      owner_.serve(*c);
    }
  }

  FrontServer& owner_;
  size_t max_queued_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Conn>> q_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

FrontServer::FrontServer(FrontLimits limits) : lim_(limits) {
  new_task_queue = [] { return new InlineQueue(); };
  // SO_REUSEADDR only: with cpp-httplib's default SO_REUSEPORT a second server could bind the
  // same port and the kernel would split the requests between the two.
  set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
}

FrontServer::~FrontServer() { shutdown_front(); }

bool FrontServer::bind(const std::string& host, int port) {
  // Room for max_pending idle connections plus the working ones.
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max && rl.rlim_cur < 8192) {
    rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, 8192);
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (!bind_to_port(host, port)) return false;
  // cpp-httplib listens with a backlog of 5; listen() again on Linux just sets the new backlog.
  ::listen(svr_sock_, lim_.backlog);
  return true;
}

bool FrontServer::run() {
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  heavy_ = std::make_unique<Pool>(*this, lim_.workers, lim_.max_queued);
  light_ = std::make_unique<Pool>(*this, lim_.light_workers, lim_.max_queued);
  gate_ = std::thread([this] { gate_loop(); });
  const bool ok = listen_after_bind();
  shutdown_front();
  return ok;
}

void FrontServer::shutdown_front() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  if (wake_[1] >= 0) (void)!::write(wake_[1], "x", 1);
  if (gate_.joinable()) gate_.join();
  heavy_.reset();  // ~Pool: running requests finish, queued ones get a 503
  light_.reset();
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& c : incoming_) close(c->fd);
    incoming_.clear();
  }
  for (int& fd : wake_) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
}

bool FrontServer::process_and_close_socket(socket_t sock) {
  auto c = std::make_unique<Conn>();
  c->fd = sock;
  c->accepted = Clock::now();
  set_nonblocking(sock);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) {
      close(sock);
      return false;
    }
    incoming_.push_back(std::move(c));
  }
  (void)!::write(wake_[1], "x", 1);
  return true;
}

void FrontServer::gate_loop() {
  std::vector<std::unique_ptr<Conn>> pending;
  std::vector<pollfd> fds;
  char tmp[4096];
  for (;;) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stopping_) break;
      for (auto& c : incoming_) pending.push_back(std::move(c));
      incoming_.clear();
    }
    // Over the cap: drop the oldest (a real client sends its head at once, so it is never old).
    while (pending.size() > lim_.max_pending) {
      auto oldest = std::min_element(pending.begin(), pending.end(),
                                     [](const auto& a, const auto& b) { return a->accepted < b->accepted; });
      reply_and_close((*oldest)->fd, 503, "Service Unavailable", "too many connections");
      pending.erase(oldest);
    }
    auto now = Clock::now();
    int timeout = 1000;
    fds.assign(1, pollfd{wake_[0], POLLIN, 0});
    for (const auto& c : pending) {
      fds.push_back(pollfd{c->fd, POLLIN, 0});
      timeout = std::min(timeout, ms_until(c->accepted + std::chrono::milliseconds(lim_.head_timeout_ms), now));
    }
    if (poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) break;
    if (fds[0].revents & POLLIN) {
      while (::read(wake_[0], tmp, sizeof(tmp)) > 0) {
      }
    }
    now = Clock::now();
    std::vector<std::unique_ptr<Conn>> keep;
    keep.reserve(pending.size());
    for (size_t i = 0; i < pending.size(); ++i) {
      std::unique_ptr<Conn>& c = pending[i];
      bool drop = false, ready = false;
      if (fds[i + 1].revents) {
        for (;;) {
          const ssize_t n = recv(c->fd, tmp, sizeof(tmp), MSG_DONTWAIT);
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            drop = true;
            break;
          }
          if (n < 0) break;
          c->buf.append(tmp, static_cast<size_t>(n));
          const size_t from = c->scanned >= 3 ? c->scanned - 3 : 0;
          const bool crlf = c->buf.find("\r\n\r\n", from) != std::string::npos;
          if (crlf || c->buf.find("\n\n", from) != std::string::npos) {
            ready = true;
            break;
          }
          c->scanned = c->buf.size();
          if (c->buf.size() > lim_.max_head_bytes) {
            reply_and_close(c->fd, 431, "Request Header Fields Too Large", "request head too large");
            c->fd = -1;
            drop = true;
            break;
          }
        }
      }
      if (ready) {
        dispatch(std::move(c));
      } else if (drop) {
        if (c->fd >= 0) close(c->fd);
      } else if (now >= c->accepted + std::chrono::milliseconds(lim_.head_timeout_ms)) {
        reply_and_close(c->fd, 408, "Request Timeout", "request head not received in time");
      } else {
        keep.push_back(std::move(c));
      }
    }
    pending.swap(keep);
  }
  for (auto& c : pending) close(c->fd);
}

void FrontServer::dispatch(std::unique_ptr<Conn> c) {
  const std::string_view head(c->buf);
  const bool light = head.rfind("GET ", 0) == 0 || head.rfind("HEAD ", 0) == 0 || head.rfind("OPTIONS ", 0) == 0;
  const int fd = c->fd;
  if (!(light ? light_ : heavy_)->push(c)) reply_and_close(fd, 503, "Service Unavailable", "server busy");
}

void FrontServer::serve(Conn& c) {
  FrontStream strm(c, lim_);
  tl_fd = c.fd;
  tl_accepted = c.accepted;
  tl_gone = false;
  tl_last_check = Clock::time_point{};
  bool closed = false;
  try {
    process_request(strm, /*close_connection=*/true, closed, nullptr);
  } catch (...) {
  }
  tl_fd = -1;
  // Lingering close: a socket closed with unread input sends a reset, which can destroy the
  // response in flight (e.g. a 413 before the body was read). Read what is left for a moment.
  shutdown(c.fd, SHUT_WR);
  const auto until = Clock::now() + std::chrono::milliseconds(500);
  char tmp[16384];
  size_t drained = 0;
  for (;;) {
    const ssize_t n = recv(c.fd, tmp, sizeof(tmp), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) break;
    if (n > 0) {
      drained += static_cast<size_t>(n);
      if (drained > (16u << 20)) break;
      continue;
    }
    const int w = ms_until(until, Clock::now());
    if (w <= 0) break;
    pollfd p{c.fd, POLLIN, 0};
    if (poll(&p, 1, w) <= 0) break;
  }
  close(c.fd);
  c.fd = -1;
}

}  // namespace oxi::server
