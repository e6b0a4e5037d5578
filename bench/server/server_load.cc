// server_load: a closed-loop load generator for `tributary serve` on loopback.
//
// Opens --connections connections to a running server, keeps --pipeline
// requests in flight on each (a new request is sent as soon as an answer
// arrives), and after a --warmup measures for --duration seconds: requests/s,
// documents/s and the latency of each request (written to the socket ->
// its response read) at p50 / p99 / p99.9 / max. Requests are learn or
// predict requests of --batch documents taken in order (cycling) from a
// document stream whose term ids are already in the model's id space (a
// server started with `--schema` of that same stream).
//
// The requests are serialized once up front, and the responses are only
// scanned for their status code, so the generator spends its time in the
// kernel, not in protobuf. Connections are spread over --threads threads,
// each running one epoll loop.
//
//   server_load --connect 127.0.0.1:PORT --in docs.pb --mode predict
//               --connections 8 --batch 16 --pipeline 4 --duration 5 [--json]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <iostream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tributary/v1/tributary.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace v1 = tributary::v1;
using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;
using google::protobuf::internal::WireFormatLite;

struct Options {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string in;
  std::string mode = "predict";
  unsigned connections = 1;
  unsigned threads = 1;
  unsigned batch = 1;
  unsigned pipeline = 1;
  double duration = 5;
  double warmup = 1;
  bool json = false;
  std::string label;
};

[[noreturn]] void Die(const std::string& msg) {
  std::cerr << "server_load: " << msg << std::endl;
  std::exit(2);
}

std::string Frame(const google::protobuf::MessageLite& m) {
  std::string body = m.SerializeAsString();
  uint8_t hdr[10];
  uint8_t* end = CodedOutputStream::WriteVarint32ToArray(static_cast<uint32_t>(body.size()), hdr);
  return std::string(reinterpret_cast<char*>(hdr), static_cast<size_t>(end - hdr)) + body;
}

// The documents of a stream file (its header frame skipped).
std::vector<v1::Document> ReadDocuments(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) Die("cannot open '" + path + "'");
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CodedInputStream in(reinterpret_cast<const uint8_t*>(data.data()), static_cast<int>(data.size()));
  in.SetTotalBytesLimit(INT32_MAX);
  std::vector<v1::Document> docs;
  bool header = true;
  uint32_t len = 0;
  while (in.ReadVarint32(&len)) {
    std::string body;
    if (!in.ReadString(&body, static_cast<int>(len))) Die("'" + path + "': truncated frame");
    if (header) {
      v1::StreamHeader h;
      if (!h.ParseFromString(body) || h.magic() != "tributary.stream") Die("'" + path + "': not a tributary stream");
      header = false;
      continue;
    }
    docs.emplace_back();
    if (!docs.back().ParseFromString(body)) Die("'" + path + "': a document does not parse");
  }
  if (docs.empty()) Die("'" + path + "': no documents");
  return docs;
}

// The status code of a serialized Response (field 2), without parsing the
// rest. -1 when the bytes are not a Response.
int ResponseCode(const char* p, size_t n) {
  CodedInputStream in(reinterpret_cast<const uint8_t*>(p), static_cast<int>(n));
  int code = 0;
  for (;;) {
    uint32_t tag = in.ReadTag();
    if (tag == 0) return in.ConsumedEntireMessage() || in.CurrentPosition() == static_cast<int>(n) ? code : -1;
    if (WireFormatLite::GetTagFieldNumber(tag) == 2 &&
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_VARINT) {
      uint32_t v = 0;
      if (!in.ReadVarint32(&v)) return -1;
      code = static_cast<int>(v);
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return -1;
    }
  }
}

struct Conn {
  int fd = -1;
  std::string out;  // bytes not yet written
  size_t out_off = 0;
  std::string in;  // bytes read, not yet parsed
  std::deque<Clock::time_point> sent_at;
  size_t next_frame = 0;
  bool want_write = false;
};

struct ThreadResult {
  std::vector<uint32_t> latency_us;  // responses received inside the window
  uint64_t requests = 0, errors = 0;
  std::map<int, uint64_t> codes;
  std::string fatal;
};

int Connect(const Options& o) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) Die(std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(o.port);
  if (::inet_pton(AF_INET, o.host.c_str(), &a.sin_addr) != 1) Die("bad IPv4 address '" + o.host + "'");
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    Die("connect " + o.host + ":" + std::to_string(o.port) + ": " + std::strerror(errno));
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

void RunThread(const Options& o, const std::vector<std::string>& frames, unsigned nconns, Clock::time_point start,
               Clock::time_point window_begin, Clock::time_point window_end, size_t frame_offset, ThreadResult* res) {
  int ep = ::epoll_create1(0);
  std::vector<Conn> conns(nconns);
  for (size_t i = 0; i < conns.size(); ++i) {
    Conn& c = conns[i];
    c.fd = Connect(o);
    c.next_frame = (frame_offset + i * 7919) % frames.size();
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = i;
    ::epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
  }
  std::this_thread::sleep_until(start);
  auto set_write = [&](size_t i, bool on) {
    Conn& c = conns[i];
    if (c.want_write == on) return;
    c.want_write = on;
    epoll_event ev{};
    ev.events = EPOLLIN | (on ? EPOLLOUT : 0u);
    ev.data.u64 = i;
    ::epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev);
  };
  auto flush = [&](size_t i) -> bool {
    Conn& c = conns[i];
    while (c.out_off < c.out.size()) {
      ssize_t w = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
      if (w < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (errno == EINTR) continue;
        res->fatal = std::string("send: ") + std::strerror(errno);
        return false;
      }
      c.out_off += static_cast<size_t>(w);
    }
    if (c.out_off == c.out.size()) {
      c.out.clear();
      c.out_off = 0;
    }
    set_write(i, !c.out.empty());
    return true;
  };
  auto enqueue = [&](size_t i, Clock::time_point now) {
    Conn& c = conns[i];
    c.out += frames[c.next_frame];
    c.next_frame = (c.next_frame + 1) % frames.size();
    c.sent_at.push_back(now);
  };
  {
    auto now = Clock::now();
    for (size_t i = 0; i < conns.size(); ++i) {
      for (unsigned k = 0; k < o.pipeline; ++k) enqueue(i, now);
      if (!flush(i)) return;
    }
  }
  size_t inflight = conns.size() * o.pipeline;
  const auto drain_deadline = window_end + std::chrono::seconds(30);
  std::vector<epoll_event> events(conns.size() + 1);
  std::vector<char> buf(256 * 1024);
  while (inflight > 0) {
    int n = ::epoll_wait(ep, events.data(), static_cast<int>(events.size()), 100);
    if (n < 0 && errno != EINTR) {
      res->fatal = std::string("epoll_wait: ") + std::strerror(errno);
      return;
    }
    auto now = Clock::now();
    if (now > drain_deadline) {
      res->fatal = std::to_string(inflight) + " requests still unanswered 30 s after the end";
      return;
    }
    for (int e = 0; e < n; ++e) {
      size_t i = events[e].data.u64;
      Conn& c = conns[i];
      if (events[e].events & EPOLLOUT) {
        if (!flush(i)) return;
      }
      if (!(events[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
      for (;;) {
        ssize_t r = ::recv(c.fd, buf.data(), buf.size(), 0);
        if (r < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK) break;
          if (errno == EINTR) continue;
          res->fatal = std::string("recv: ") + std::strerror(errno);
          return;
        }
        if (r == 0) {
          res->fatal = "the server closed a connection";
          return;
        }
        c.in.append(buf.data(), static_cast<size_t>(r));
        if (static_cast<size_t>(r) < buf.size()) break;
      }
      now = Clock::now();
      size_t off = 0;
      bool sent_more = false;
      while (off < c.in.size()) {
        CodedInputStream hin(reinterpret_cast<const uint8_t*>(c.in.data() + off),
                             static_cast<int>(std::min<size_t>(c.in.size() - off, 10)));
        uint32_t len = 0;
        if (!hin.ReadVarint32(&len)) break;
        size_t h = static_cast<size_t>(hin.CurrentPosition());
        if (c.in.size() - off < h + len) break;
        int code = ResponseCode(c.in.data() + off + h, len);
        off += h + len;
        if (c.sent_at.empty()) {
          res->fatal = "a response nobody asked for";
          return;
        }
        auto sent = c.sent_at.front();
        c.sent_at.pop_front();
        --inflight;
        if (now >= window_begin && now < window_end) {
          ++res->requests;
          res->latency_us.push_back(static_cast<uint32_t>(
              std::min<int64_t>(std::chrono::duration_cast<std::chrono::microseconds>(now - sent).count(), UINT32_MAX)));
          if (code != 0) {
            ++res->errors;
            ++res->codes[code];
          }
        } else if (code != 0) {
          ++res->codes[code];
        }
        if (now < window_end) {
          enqueue(i, now);
          ++inflight;
          sent_more = true;
        }
      }
      c.in.erase(0, off);
      if (sent_more && !flush(i)) return;
    }
  }
  for (auto& c : conns) ::close(c.fd);
  ::close(ep);
}

double Percentile(std::vector<uint32_t>& v, double q) {
  if (v.empty()) return 0;
  size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k] / 1000.0;
}

void Usage() {
  std::cerr << "usage: server_load --connect HOST:PORT --in docs.pb [--mode predict|learn] [--connections N]\n"
               "                   [--batch B] [--pipeline D] [--threads T] [--duration S] [--warmup S]\n"
               "                   [--label TEXT] [--json]\n";
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  GOOGLE_PROTOBUF_VERIFY_VERSION;
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) Usage();
      return argv[++i];
    };
    try {
      if (a == "--connect") {
        std::string hp = val();
        auto colon = hp.rfind(':');
        if (colon == std::string::npos) Usage();
        o.host = hp.substr(0, colon);
        o.port = static_cast<uint16_t>(std::stoi(hp.substr(colon + 1)));
      } else if (a == "--in") {
        o.in = val();
      } else if (a == "--mode") {
        o.mode = val();
      } else if (a == "--connections") {
        o.connections = static_cast<unsigned>(std::stoul(val()));
      } else if (a == "--threads") {
        o.threads = static_cast<unsigned>(std::stoul(val()));
      } else if (a == "--batch") {
        o.batch = static_cast<unsigned>(std::stoul(val()));
      } else if (a == "--pipeline") {
        o.pipeline = static_cast<unsigned>(std::stoul(val()));
      } else if (a == "--duration") {
        o.duration = std::stod(val());
      } else if (a == "--warmup") {
        o.warmup = std::stod(val());
      } else if (a == "--label") {
        o.label = val();
      } else if (a == "--json") {
        o.json = true;
      } else {
        Usage();
      }
    } catch (const std::exception&) {
      Usage();
    }
  }
  if (o.port == 0 || o.in.empty() || (o.mode != "predict" && o.mode != "learn") || o.connections == 0 ||
      o.batch == 0 || o.pipeline == 0 || o.threads == 0 || o.duration <= 0 || o.warmup < 0) {
    Usage();
  }
  o.threads = std::min(o.threads, o.connections);

  // Pre-serialized requests: consecutive batches of the stream, cycling.
  std::vector<v1::Document> docs = ReadDocuments(o.in);
  const size_t nframes = std::max<size_t>(1, std::min<size_t>(4096, docs.size() / o.batch));
  std::vector<std::string> frames;
  frames.reserve(nframes);
  size_t d = 0;
  for (size_t f = 0; f < nframes; ++f) {
    v1::Request r;
    r.set_request_id(f + 1);
    auto* list = o.mode == "learn" ? r.mutable_learn()->mutable_documents() : r.mutable_predict()->mutable_documents();
    for (unsigned k = 0; k < o.batch; ++k) {
      *list->Add() = docs[d];
      d = (d + 1) % docs.size();
    }
    frames.push_back(Frame(r));
  }

  auto start = Clock::now() + std::chrono::milliseconds(200);  // after every thread has connected
  auto wb = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.warmup));
  auto we = wb + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.duration));
  std::vector<ThreadResult> results(o.threads);
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < o.threads; ++t) {
    unsigned n = o.connections / o.threads + (t < o.connections % o.threads ? 1 : 0);
    threads.emplace_back(RunThread, std::cref(o), std::cref(frames), n, start, wb, we, t * 131, &results[t]);
  }
  // This process's CPU time inside the measurement window (all threads).
  auto cpu_now = [] {
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  };
  std::this_thread::sleep_until(wb);
  const double cpu_begin = cpu_now();
  std::this_thread::sleep_until(we);
  const double cpu_end = cpu_now();
  for (auto& t : threads) t.join();

  std::vector<uint32_t> lat;
  uint64_t requests = 0, errors = 0;
  std::map<int, uint64_t> codes;
  for (auto& r : results) {
    if (!r.fatal.empty()) Die(r.fatal);
    lat.insert(lat.end(), r.latency_us.begin(), r.latency_us.end());
    requests += r.requests;
    errors += r.errors;
    for (auto& [k, v] : r.codes) codes[k] += v;
  }
  const double rps = static_cast<double>(requests) / o.duration;
  const double dps = rps * o.batch;
  const double p50 = Percentile(lat, 0.50), p99 = Percentile(lat, 0.99), p999 = Percentile(lat, 0.999);
  const double mx = lat.empty() ? 0 : *std::max_element(lat.begin(), lat.end()) / 1000.0;
  const double cpu = cpu_end - cpu_begin;
  if (o.json) {
    std::printf(
        "{\"label\":\"%s\",\"mode\":\"%s\",\"connections\":%u,\"batch\":%u,\"pipeline\":%u,\"threads\":%u,"
        "\"seconds\":%.3f,\"requests\":%llu,\"errors\":%llu,\"requests_per_s\":%.1f,\"documents_per_s\":%.1f,"
        "\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"p999_ms\":%.3f,\"max_ms\":%.3f,\"client_cpu_s\":%.3f}\n",
        o.label.c_str(), o.mode.c_str(), o.connections, o.batch, o.pipeline, o.threads, o.duration,
        static_cast<unsigned long long>(requests), static_cast<unsigned long long>(errors), rps, dps, p50, p99, p999, mx, cpu);
  } else {
    std::printf("%-8s conns %3u batch %3u pipeline %3u: %10.0f req/s %10.0f docs/s  p50 %7.3f ms  p99 %7.3f ms  "
                "p99.9 %7.3f ms  max %7.3f ms  errors %llu\n",
                o.mode.c_str(), o.connections, o.batch, o.pipeline, rps, dps, p50, p99, p999, mx,
                static_cast<unsigned long long>(errors));
  }
  for (auto& [k, v] : codes) {
    std::fprintf(stderr, "server_load: %llu responses with code %s\n", static_cast<unsigned long long>(v),
                 v1::Response::Code_IsValid(k) ? v1::Response::Code_Name(static_cast<v1::Response::Code>(k)).c_str()
                                               : std::to_string(k).c_str());
  }
  return errors == 0 ? 0 : 1;
}
