// The deterministic driver: the target's seeds, then N inputs made by mutating the corpus with a
// fixed-seed generator (no libFuzzer, any compiler), so CI runs the same inputs every time.
//   fuzz-NAME-loop [--iterations=N] [--seed=S]     seeds, then N mutated inputs
//   fuzz-NAME-loop --seed=S --dump-iteration=K     writes mutated input K to NAME-iteration-K.bin
//   fuzz-NAME-loop --write-seeds=DIR               the seeds as files (a libFuzzer corpus)
//   fuzz-NAME-loop FILE|DIR...                     runs those inputs once (libFuzzer's crash-*)
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz.hpp"

using cudaipc::fuzz::Bytes;
using cudaipc::fuzz::Verdict;

// Present when a sanitizer runtime is linked in: it prints our context after its report.
extern "C" void __sanitizer_set_death_callback(void (*)(void)) __attribute__((weak));

namespace {

// Written by the crash paths, so it is prepared before each input. Never destroyed: LeakSanitizer's
// check at exit runs after static destructors and calls the death callback that prints it.
std::string& g_crash_note = *new std::string;

void print_crash_note() {
  if (!g_crash_note.empty()) {
    ssize_t ignored = ::write(2, g_crash_note.data(), g_crash_note.size());
    (void)ignored;
  }
}

void on_fatal_signal(int sig) {
  print_crash_note();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void install_crash_note() {
  if (__sanitizer_set_death_callback) {
    __sanitizer_set_death_callback(print_crash_note);
    return;
  }
  // Without a sanitizer (the gcc CI build) a crash is a plain signal: say which input it was.
  for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL}) ::signal(sig, on_fatal_signal);
}

// splitmix64: the same sequence with every compiler and standard library, unlike <random>'s
// distributions.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(next() % n); }

 private:
  std::uint64_t s_;
};

void put_le(Bytes& b, std::size_t pos, std::uint64_t v, std::size_t n) {
  for (std::size_t i = 0; i < n && pos + i < b.size(); ++i)
    b[pos + i] = static_cast<std::uint8_t>(v >> (8 * i));
}

std::uint64_t get_le(const Bytes& b, std::size_t pos, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n && pos + i < b.size(); ++i)
    v |= static_cast<std::uint64_t>(b[pos + i]) << (8 * i);
  return v;
}

// Values that sit on the decoders' limits: sizes, counts, message and caps bounds, sign bits.
std::uint64_t interesting(Rng& r, const Bytes& b) {
  const std::uint64_t values[] = {0,
                                  1,
                                  2,
                                  3,
                                  4,
                                  7,
                                  8,
                                  16,
                                  31,
                                  32,
                                  33,
                                  63,
                                  64,
                                  65,
                                  127,
                                  128,
                                  255,
                                  256,
                                  1024,
                                  1025,
                                  4095,
                                  4096,
                                  4097,
                                  65535,
                                  65536,
                                  65537,
                                  65538,  // targets read a control byte or two before the message
                                  65539,
                                  0x7fffffff,
                                  0x80000000,
                                  0xffffffff,
                                  0x100000000ull,
                                  0x7fffffffffffffffull,
                                  0x8000000000000000ull,
                                  ~0ull,
                                  b.size(),
                                  b.size() - 16};
  return values[r.below(std::size(values))];
}

void mutate_once(Rng& r, Bytes& b, const std::vector<Bytes>& corpus) {
  const std::size_t width[] = {1, 2, 4, 8};
  switch (r.below(b.empty() ? 2 : 12)) {
    case 0:  // insert random bytes
    case 1: {
      std::size_t pos = r.below(b.size() + 1), n = 1 + r.below(16);
      Bytes add(n);
      for (auto& x : add) x = static_cast<std::uint8_t>(r.next());
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(pos), add.begin(), add.end());
      break;
    }
    case 2:  // flip a bit
      b[r.below(b.size())] ^= static_cast<std::uint8_t>(1u << r.below(8));
      break;
    case 3:  // a random byte
      b[r.below(b.size())] = static_cast<std::uint8_t>(r.next());
      break;
    case 4:  // an interesting value of 1, 2, 4 or 8 bytes; field-aligned half the time
    case 5: {
      std::size_t w = width[r.below(4)];
      std::size_t pos = r.below(b.size());
      if (r.below(2)) pos -= pos % w;
      put_le(b, pos, interesting(r, b), w);
      break;
    }
    case 6: {  // a small step up or down of a 4- or 8-byte field
      std::size_t w = r.below(2) ? 4 : 8;
      std::size_t pos = r.below(b.size());
      pos -= pos % w;
      std::uint64_t delta = 1 + r.below(16);
      put_le(b, pos, r.below(2) ? get_le(b, pos, w) + delta : get_le(b, pos, w) - delta, w);
      break;
    }
    case 7: {  // erase a range
      std::size_t pos = r.below(b.size()),
                  n = 1 + r.below(std::min<std::size_t>(b.size() - pos, 32));
      b.erase(b.begin() + static_cast<std::ptrdiff_t>(pos),
              b.begin() + static_cast<std::ptrdiff_t>(pos + n));
      break;
    }
    case 8:  // truncate
      b.resize(r.below(b.size()));
      break;
    case 9: {  // duplicate a chunk in place
      std::size_t pos = r.below(b.size()),
                  n = 1 + r.below(std::min<std::size_t>(b.size() - pos, 64));
      Bytes chunk(b.begin() + static_cast<std::ptrdiff_t>(pos),
                  b.begin() + static_cast<std::ptrdiff_t>(pos + n));
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(r.below(b.size() + 1)), chunk.begin(),
               chunk.end());
      break;
    }
    case 11: {  // grow or shrink to a size on a limit (64 KiB messages, pages), repeating content
      std::uint64_t to = interesting(r, b);
      if (to > 2 * 65536 + 64) break;
      std::size_t old = b.size();
      b.resize(static_cast<std::size_t>(to));
      for (std::size_t i = old; i < b.size(); ++i) b[i] = b[i % old];
      break;
    }
    case 10: {  // splice: this input's head, another's tail
      const Bytes& other = corpus[r.below(corpus.size())];
      std::size_t cut = r.below(b.size() + 1), from = r.below(other.size() + 1);
      b.resize(cut);
      b.insert(b.end(), other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
      break;
    }
  }
}

Bytes read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "cannot read %s\n", p.c_str());
    std::exit(2);
  }
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void write_file(const std::filesystem::path& p, const Bytes& b) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", p.c_str());
    std::exit(2);
  }
}

bool flag(const char* arg, const char* name, std::string& value) {
  std::size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  value = arg + n + 1;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const auto& t = cudaipc::fuzz::target();
  std::uint64_t iterations = 10000, seed = 1;
  long long dump = -1;
  std::string seeds_dir;
  std::vector<std::filesystem::path> replay;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (flag(argv[i], "--iterations", v)) {
      iterations = std::strtoull(v.c_str(), nullptr, 10);
    } else if (flag(argv[i], "--seed", v)) {
      seed = std::strtoull(v.c_str(), nullptr, 10);
    } else if (flag(argv[i], "--dump-iteration", v)) {
      dump = std::strtoll(v.c_str(), nullptr, 10);
    } else if (flag(argv[i], "--write-seeds", v)) {
      seeds_dir = v;
    } else if (argv[i][0] == '-') {
      std::fprintf(stderr,
                   "usage: %s [--iterations=N] [--seed=S] [--dump-iteration=K] "
                   "[--write-seeds=DIR] [FILE|DIR...]\n",
                   argv[0]);
      return 2;
    } else {
      replay.emplace_back(argv[i]);
    }
  }
  install_crash_note();
  cudaipc::fuzz::init_once();

  std::vector<Bytes> corpus = t.seeds();
  if (!seeds_dir.empty()) {
    std::filesystem::create_directories(seeds_dir);
    for (std::size_t i = 0; i < corpus.size(); ++i)
      write_file(std::filesystem::path(seeds_dir) / ("seed-" + std::to_string(i)), corpus[i]);
    std::printf("%s: wrote %zu seeds to %s\n", t.name, corpus.size(), seeds_dir.c_str());
    return 0;
  }

  if (!replay.empty()) {
    std::size_t runs = 0;
    auto run_file = [&](const std::filesystem::path& p) {
      Bytes b = read_file(p);
      cudaipc::fuzz::set_context("input " + p.string());
      g_crash_note = "crashed on input " + p.string() + "\n";
      Verdict v = cudaipc::fuzz::run_input(b.data(), b.size());
      std::printf("%s: %s\n", p.c_str(), v == Verdict::accepted ? "accepted" : "rejected");
      ++runs;
    };
    for (const auto& p : replay) {
      if (std::filesystem::is_directory(p)) {
        for (const auto& e : std::filesystem::directory_iterator(p))
          if (e.is_regular_file()) run_file(e.path());
      } else {
        run_file(p);
      }
    }
    std::printf("%s: ran %zu inputs\n", t.name, runs);
    g_crash_note = "after the last input (the leak check at exit)\n";
    return 0;
  }

  for (std::size_t i = 0; i < corpus.size(); ++i) {
    cudaipc::fuzz::set_context("seed " + std::to_string(i));
    g_crash_note = "crashed on seed " + std::to_string(i) + "\n";
    if (cudaipc::fuzz::run_input(corpus[i].data(), corpus[i].size()) != Verdict::accepted)
      cudaipc::fuzz::fail("seed " + std::to_string(i) + " was rejected: the seeds are stale");
  }

  // Accepted mutants join the corpus (bounded), so later mutations start from inputs that got
  // past more checks: a crude stand-in for coverage feedback that keeps the run deterministic.
  constexpr std::size_t kCorpusLimit = 512;
  const std::size_t n_seeds = corpus.size();
  Rng rng(seed);
  std::uint64_t accepted = 0;
  for (std::uint64_t it = 0; it < iterations; ++it) {
    Bytes in = corpus[rng.below(corpus.size())];
    for (std::size_t m = 1 + rng.below(4); m > 0; --m) mutate_once(rng, in, corpus);
    if (dump >= 0 && it == static_cast<std::uint64_t>(dump)) {
      std::string name = std::string(t.name) + "-iteration-" + std::to_string(it) + ".bin";
      write_file(name, in);
      std::printf("wrote %s (%zu bytes)\n", name.c_str(), in.size());
      return 0;
    }
    std::string where = "iteration " + std::to_string(it) + " of --seed=" + std::to_string(seed);
    g_crash_note = "crashed at " + where + "; get the input with --seed=" + std::to_string(seed) +
                   " --dump-iteration=" + std::to_string(it) + "\n";
    cudaipc::fuzz::set_context(where + " (--dump-iteration=" + std::to_string(it) +
                               " writes the input)");
    if (cudaipc::fuzz::run_input(in.data(), in.size()) == Verdict::accepted) {
      ++accepted;
      if (corpus.size() < kCorpusLimit)
        corpus.push_back(std::move(in));
      else
        corpus[n_seeds + rng.below(kCorpusLimit - n_seeds)] = std::move(in);
    }
  }
  g_crash_note = "after the last input (the leak check at exit)\n";
  std::printf(
      "%s: %zu seeds accepted; %llu mutated inputs (seed %llu): %llu accepted, %llu "
      "rejected\n",
      t.name, n_seeds, static_cast<unsigned long long>(iterations),
      static_cast<unsigned long long>(seed), static_cast<unsigned long long>(accepted),
      static_cast<unsigned long long>(iterations - accepted));
  return 0;
}
