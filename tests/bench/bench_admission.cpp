// cudaipc-bench-admission: what other clients of the producer's socket cost the frames. Publish
// latency with one every-frame consumer process that verifies every byte, in the same run:
//   baseline   nothing else on the socket
//   idle       N connections open that never send hello (re-opened when the producer drops them)
//   hello      N connections that send hello and then stay silent (most are refused: max_consumers)
//   flood      one process connecting and closing in a loop, as fast as it can
// The load runs in its own process (another client, same uid) on raw sockets. Prints tables; never
// fails on a timing, only on a lost or corrupted frame or a load that could not be set up.
//   cudaipc-bench-admission [--sizes=4K,8294400] [--samples=N] [--idle=500] [--gap-us=200]
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench.hpp"
#include "cudaipc/consumer.hpp"
#include "cudaipc/error.hpp"
#include "cudaipc/producer.hpp"
#include "pattern.hpp"
#include "protocol.hpp"
#include "unix_socket.hpp"

namespace bench {
namespace {

using namespace std::chrono_literals;

struct Options {
  std::vector<std::uint64_t> sizes = {4096, 8294400};  // small; 1080p RGBA u8
  std::uint64_t samples = 0;                           // 0: 3000 small, 400 for >= 1 MiB
  std::uint64_t warmup = 50;
  std::uint64_t idle = 500;
  std::uint64_t gap_us = 200;
  std::vector<std::string> loads = {"baseline", "idle", "hello", "flood"};
};

std::atomic<bool> g_stop{false};
void on_term(int) {
  g_stop = true;
}

// Soft limit up to the hard one: the producer and the load process each hold ~N fds.
rlim_t raise_nofile() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) throw std::runtime_error("getrlimit failed");
  r.rlim_cur = r.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &r) != 0) throw std::runtime_error("setrlimit failed");
  return r.rlim_cur;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path + ".tmp");
  f << text;
  f.close();
  std::filesystem::rename(path + ".tmp", path);
}

std::string arg(const std::vector<std::string>& args, const std::string& key) {
  for (const auto& a : args)
    if (a.rfind(key + "=", 0) == 0) return a.substr(key.size() + 1);
  return {};
}

// ---- consumer process: every frame, every byte checked, publish->acquire per frame ----

int consumer_main(const std::vector<std::string>& args) {
  const std::string path = arg(args, "path"), out = arg(args, "out");
  const std::uint64_t frames = std::strtoull(arg(args, "frames").c_str(), nullptr, 10);
  const std::uint64_t warmup = std::strtoull(arg(args, "warmup").c_str(), nullptr, 10);
  cudaipc::ConsumerOptions o;
  o.path = path;
  o.reconnect = false;
  cudaipc::Consumer c(o);
  std::vector<std::uint64_t> lat;
  lat.reserve(frames);
  std::uint64_t seen = 0, bad = 0;
  while (seen < frames) {
    cudaipc::Event e = c.next(10s);
    const std::uint64_t now = mono_ns();
    if (e.type == cudaipc::EventType::format) continue;
    if (e.type != cudaipc::EventType::frame) {
      std::fprintf(stderr, "consumer: event %d after %llu frames: %s\n", static_cast<int>(e.type),
                   static_cast<unsigned long long>(seen), e.message.c_str());
      return 1;
    }
    ++seen;
    if (e.frame.seq() != seen) ++bad;  // every-frame: no gap, no repeat
    if (cudaipc::testing::check_pattern(e.frame.data(), e.frame.size(), e.frame.seq()) !=
        e.frame.size())
      ++bad;
    if (seen > warmup) lat.push_back(now - e.frame.desc().publish_time_ns);
  }
  write_samples(out + ".lat", lat);
  write_kv(out + ".kv", {{"bad", static_cast<double>(bad)}, {"seen", static_cast<double>(seen)}});
  return bad == 0 ? 0 : 1;
}

// ---- load process ----

struct LoadStats {
  std::uint64_t held = 0, reconnects = 0, welcomed = 0, refused = 0, connects = 0, errors = 0;
  std::string first_error;
};

void note_error(LoadStats& s, const std::exception& e) {
  ++s.errors;
  if (s.first_error.empty()) s.first_error = e.what();
}

// idle / hello: `n` connections held; idle ones are re-opened when the producer drops them.
void hold_connections(const std::string& path, std::uint64_t n, bool hello, const std::string& out,
                      LoadStats& s) {
  std::vector<cudaipc::UniqueFd> conns;
  auto open_one = [&]() -> cudaipc::UniqueFd {
    cudaipc::UniqueFd fd = cudaipc::connect_unix(path);
    if (hello) cudaipc::send_hello(fd.get(), cudaipc::HelloMsg{cudaipc::ConsumeMode::every_frame});
    return fd;
  };
  for (std::uint64_t i = 0; i < n && !g_stop; ++i) {
    try {
      conns.push_back(open_one());
    } catch (const std::exception& e) {
      note_error(s, e);
    }
  }
  s.held = conns.size();
  write_file(out + ".ready", "ready\n");
  std::vector<pollfd> p;
  while (!g_stop) {
    p.clear();
    for (const auto& c : conns) p.push_back({c.get(), POLLIN, 0});
    int rc = ::poll(p.data(), p.size(), 100);
    if (rc <= 0) continue;
    for (std::size_t i = 0; i < conns.size(); ++i) {
      if (!conns[i] || p[i].revents == 0) continue;
      if (hello) {
        cudaipc::RawMessage raw;
        bool keep = false;
        try {
          if ((p[i].revents & POLLIN) &&
              cudaipc::recv_raw(conns[i].get(), raw, 0ms) == cudaipc::RecvStatus::ok) {
            auto r = cudaipc::parse_header(std::move(raw));
            keep = r.type != cudaipc::MsgType::refused;  // welcome, then format: keep the place
            if (r.type == cudaipc::MsgType::welcome) ++s.welcomed;
            if (r.type == cudaipc::MsgType::refused) ++s.refused;
          }
        } catch (const std::exception& e) {
          note_error(s, e);
        }
        // Refused or dropped: not re-opened, or this would be a flood.
        if (!keep) conns[i].reset();
      } else if (!hello) {
        // The producer dropped an idle connection (its handshake timeout): open another.
        conns[i].reset();
        try {
          conns[i] = open_one();
          ++s.reconnects;
        } catch (const std::exception& e) {
          note_error(s, e);
        }
      }
    }
    conns.erase(std::remove_if(conns.begin(), conns.end(), [](const auto& c) { return !c; }),
                conns.end());
  }
  s.held = conns.size();
}

void flood(const std::string& path, const std::string& out, LoadStats& s) {
  write_file(out + ".ready", "ready\n");
  while (!g_stop) {
    try {
      cudaipc::UniqueFd fd = cudaipc::connect_unix(path);
      ++s.connects;
    } catch (const std::exception& e) {
      note_error(s, e);
    }
  }
}

int load_main(const std::vector<std::string>& args) {
  ::signal(SIGTERM, on_term);
  raise_nofile();
  const std::string path = arg(args, "path"), out = arg(args, "out"), kind = arg(args, "kind");
  const std::uint64_t n = std::strtoull(arg(args, "n").c_str(), nullptr, 10);
  LoadStats s;
  const std::uint64_t t0 = mono_ns();
  if (kind == "flood")
    flood(path, out, s);
  else
    hold_connections(path, n, kind == "hello", out, s);
  const double secs = static_cast<double>(mono_ns() - t0) / 1e9;
  write_kv(out + ".kv", {{"held", static_cast<double>(s.held)},
                         {"reconnects", static_cast<double>(s.reconnects)},
                         {"welcomed", static_cast<double>(s.welcomed)},
                         {"refused", static_cast<double>(s.refused)},
                         {"connects_per_s", static_cast<double>(s.connects) / secs},
                         {"errors", static_cast<double>(s.errors)}});
  if (!s.first_error.empty()) write_file(out + ".err", s.first_error + "\n");
  return 0;
}

// ---- orchestrator + producer ----

struct Row {
  std::string load;
  std::uint64_t bytes = 0;
  std::uint64_t n = 0;
  double pub_p50 = 0, pub_p99 = 0, lat_p50 = 0, lat_p99 = 0, prod_cpu_pct = 0;
  Kv load_kv;
  std::string load_error;
  bool ok = false;
};

bool wait_for(const std::string& file, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!std::filesystem::exists(file)) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

Row run_one(const Options& o, const std::string& load, std::uint64_t bytes, const std::string& dir,
            int index) {
  Row row;
  row.load = load;
  row.bytes = bytes;
  const std::uint64_t samples = o.samples ? o.samples : (bytes >= (1u << 20) ? 400 : 3000);
  const std::uint64_t total = o.warmup + samples;
  const std::string base = dir + "/s" + std::to_string(index);
  cudaipc::ProducerOptions po;
  po.path = base + ".sock";
  po.slots = 4;
  po.block_timeout = 5s;
  cudaipc::Producer producer(po);
  cudaipc::Format f;
  f.tensor = cudaipc::make_tensor(cudaipc::DType::uint8, {static_cast<std::int64_t>(bytes)});
  producer.set_format(f);

  pid_t cons =
      spawn_self({"--role=consumer", "path=" + po.path, "out=" + base + ".cons",
                  "frames=" + std::to_string(total), "warmup=" + std::to_string(o.warmup)});
  const auto joined_by = std::chrono::steady_clock::now() + 10s;
  while (producer.consumer_count() < 1 && std::chrono::steady_clock::now() < joined_by)
    std::this_thread::sleep_for(1ms);
  pid_t loader = -1;
  if (load != "baseline") {
    loader = spawn_self({"--role=load", "kind=" + load, "path=" + po.path, "out=" + base + ".load",
                         "n=" + std::to_string(o.idle)});
    if (!wait_for(base + ".load.ready", 60s)) {
      std::fprintf(stderr, "bench: the %s load did not get ready\n", load.c_str());
      ::kill(loader, SIGKILL);
    }
    std::this_thread::sleep_for(100ms);  // let the socket thread take in the new connections
  }

  std::vector<std::uint8_t> src(bytes);
  std::vector<std::uint64_t> pub;
  pub.reserve(samples);
  std::uint64_t cpu0 = 0, wall0 = 0;
  bool ok = true;
  for (std::uint64_t seq = 1; seq <= total && ok; ++seq) {
    if (seq == o.warmup + 1) {
      cpu0 = cpu_ns();
      wall0 = mono_ns();
    }
    cudaipc::testing::fill_pattern(src.data(), src.size(), seq);
    const std::uint64_t t0 = mono_ns();
    cudaipc::PublishStatus st = producer.publish(src.data(), src.size());
    const std::uint64_t t1 = mono_ns();
    if (st != cudaipc::PublishStatus::published) {
      std::fprintf(stderr, "bench: frame %llu not published (status %d)\n",
                   static_cast<unsigned long long>(seq), static_cast<int>(st));
      ok = false;
    }
    if (seq > o.warmup) pub.push_back(t1 - t0);
    // Paced: the consumer has checked and released this frame before the next one, so the
    // numbers are the publish path, not back-pressure.
    const auto limit = std::chrono::steady_clock::now() + 10s;
    for (;;) {
      auto s = producer.stats();
      if (!s.consumers.empty() && s.consumers[0].delivered >= seq && s.consumers[0].leases == 0)
        break;
      // After the last frame the consumer checks it and exits; the producer may see it gone first.
      if (s.consumers.empty() && seq == total) break;
      if (std::chrono::steady_clock::now() > limit) {
        std::fprintf(stderr, "bench: consumer stuck at frame %llu\n",
                     static_cast<unsigned long long>(seq));
        ok = false;
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(o.gap_us));
  }
  const double cpu = static_cast<double>(cpu_ns() - cpu0),
               wall = static_cast<double>(mono_ns() - wall0);
  row.prod_cpu_pct = wall > 0 ? 100.0 * cpu / wall : 0;

  if (loader > 0) {
    ::kill(loader, SIGTERM);
    ok = wait_ok(loader, "load") && ok;
    row.load_kv = read_kv(base + ".load.kv");
    std::ifstream err(base + ".load.err");
    std::getline(err, row.load_error);
  }
  if (!ok) ::kill(cons, SIGKILL);
  ok = wait_ok(cons, "consumer") && ok;
  std::vector<std::uint64_t> lat = read_samples(base + ".cons.lat");
  Kv ck = read_kv(base + ".cons.kv");
  ok = ok && ck["bad"] == 0 && ck["seen"] == static_cast<double>(total);
  row.n = pub.size();
  row.pub_p50 = percentile(pub, 0.50) / 1e3;
  row.pub_p99 = percentile(pub, 0.99) / 1e3;
  row.lat_p50 = percentile(lat, 0.50) / 1e3;
  row.lat_p99 = percentile(lat, 0.99) / 1e3;
  row.ok = ok;
  return row;
}

std::string size_name(std::uint64_t b) {
  if (b == 8294400) return "1080p RGBA (8294400 B)";
  if (b % (1u << 20) == 0) return std::to_string(b >> 20) + " MiB";
  if (b % 1024 == 0) return std::to_string(b >> 10) + " KiB";
  return std::to_string(b) + " B";
}

std::string load_detail(const Row& r, const Options& o) {
  char buf[256];
  if (r.load == "baseline") return "-";
  if (r.load == "idle")
    std::snprintf(buf, sizeof buf, "%.0f/%llu held, %.0f re-opened", r.load_kv.at("held"),
                  static_cast<unsigned long long>(o.idle), r.load_kv.at("reconnects"));
  else if (r.load == "hello")
    std::snprintf(buf, sizeof buf, "%.0f welcomed, %.0f refused", r.load_kv.at("welcomed"),
                  r.load_kv.at("refused"));
  else
    std::snprintf(buf, sizeof buf, "%.0f connects/s", r.load_kv.at("connects_per_s"));
  std::string s = buf;
  if (r.load_kv.count("errors") && r.load_kv.at("errors") > 0)
    s += ", " + std::to_string(static_cast<long long>(r.load_kv.at("errors"))) + " errors (" +
         r.load_error + ")";
  return s;
}

std::vector<std::uint64_t> parse_sizes(const std::string& list) {
  std::vector<std::uint64_t> out;
  std::size_t pos = 0;
  while (pos <= list.size()) {
    std::size_t comma = list.find(',', pos);
    std::string t = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char* end = nullptr;
    std::uint64_t v = std::strtoull(t.c_str(), &end, 10);
    if (end && (*end == 'K' || *end == 'k')) v <<= 10;
    if (end && (*end == 'M' || *end == 'm')) v <<= 20;
    out.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

int main_role(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&] { return a.substr(a.find('=') + 1); };
    if (a.rfind("--sizes=", 0) == 0)
      o.sizes = parse_sizes(val());
    else if (a.rfind("--samples=", 0) == 0)
      o.samples = std::strtoull(val().c_str(), nullptr, 10);
    else if (a.rfind("--warmup=", 0) == 0)
      o.warmup = std::strtoull(val().c_str(), nullptr, 10);
    else if (a.rfind("--idle=", 0) == 0)
      o.idle = std::strtoull(val().c_str(), nullptr, 10);
    else if (a.rfind("--gap-us=", 0) == 0)
      o.gap_us = std::strtoull(val().c_str(), nullptr, 10);
    else if (a.rfind("--loads=", 0) == 0) {
      o.loads.clear();
      std::string l = val();
      for (std::size_t p = 0, c; p <= l.size(); p = c + 1) {
        c = l.find(',', p);
        o.loads.push_back(l.substr(p, c == std::string::npos ? std::string::npos : c - p));
        if (c == std::string::npos) break;
      }
    } else {
      std::printf(
          "usage: cudaipc-bench-admission [--sizes=4K,8294400] [--samples=N] [--warmup=50]\n"
          "       [--idle=500] [--gap-us=200] [--loads=baseline,idle,hello,flood]\n");
      return a == "--help" ? 0 : 2;
    }
  }
  const rlim_t nofile = raise_nofile();
  char tmpl[] = "/tmp/cudaipc-bench-admission-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  const std::string dir = tmpl;

  std::printf("socket admission: publish with other clients on the producer's socket\n");
  std::printf(
      "(host memory, 4 slots, max_consumers 16, one every-frame consumer process checking "
      "every byte; paced: next frame after the consumer released the last, +%llu us; "
      "RLIMIT_NOFILE %llu)\n\n",
      static_cast<unsigned long long>(o.gap_us), static_cast<unsigned long long>(nofile));
  std::printf(
      "| load | size | samples | publish() p50 us | p99 us | publish->acquire p50 us | p99 "
      "us | producer CPU %% | load | verified |\n|---|---|---|---|---|---|---|---|---|---|\n");
  bool all_ok = true;
  int index = 0;
  for (std::uint64_t bytes : o.sizes) {
    for (const auto& load : o.loads) {
      Row r = run_one(o, load, bytes, dir, index++);
      all_ok = all_ok && r.ok;
      std::printf("| %s | %s | %llu | %.1f | %.1f | %.1f | %.1f | %.1f | %s | %s |\n",
                  r.load.c_str(), size_name(r.bytes).c_str(), static_cast<unsigned long long>(r.n),
                  r.pub_p50, r.pub_p99, r.lat_p50, r.lat_p99, r.prod_cpu_pct,
                  load_detail(r, o).c_str(), r.ok ? "all" : "FAILED");
      std::fflush(stdout);
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::printf("\n%s\n", all_ok ? "All frames delivered and verified." : "FAILED: see stderr.");
  return all_ok ? 0 : 1;
}

}  // namespace
}  // namespace bench

int main(int argc, char** argv) {
  bench::set_self_exe(argv[0]);
  try {
    if (argc > 1 && std::string(argv[1]).rfind("--role=", 0) == 0) {
      std::string role = std::string(argv[1]).substr(7);
      std::vector<std::string> args(argv + 2, argv + argc);
      if (role == "consumer") return bench::consumer_main(args);
      if (role == "load") return bench::load_main(args);
      std::fprintf(stderr, "unknown role %s\n", role.c_str());
      return 2;
    }
    return bench::main_role(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cudaipc-bench-admission: %s\n", e.what());
    return 1;
  }
}
