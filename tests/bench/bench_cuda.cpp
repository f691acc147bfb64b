// CUDA backend and the GPU section of the report: device-memory slots exported as VMM fds or legacy
// IPC handles, filled either in place (borrowed slot: begin_frame, a GPU memset, commit) or by one
// cuMemcpyDtoDAsync from a device buffer (copy-in: publish with from_device=true). Beside the
// scenarios it times a bare device-to-device copy of each size, the floor of the copy-in path.
//
// Everything goes through the project's run-time driver table (cuda::driver()): nothing links
// libcuda, and without a driver or a GPU the section prints why and runs nothing.
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "bench.hpp"
#include "cuda/cuda_handles.hpp"
#include "cuda/driver.hpp"
#include "cuda/semaphores.hpp"
#include "cudaipc/error.hpp"

namespace bench {
namespace {

namespace cu = cudaipc::cuda;

// Both sides and the copy floor work on the same device, so the consumer's check can use the
// primary context its channel already lives in.
constexpr int kDevice = 0;
constexpr std::uint64_t k1080pRgbaU8 = 1920ull * 1080 * 4;    // 8,294,400 bytes
constexpr std::uint64_t k4kRgbaF32 = 3840ull * 2160 * 4 * 4;  // 132,710,400 bytes
// Checking every frame would put a stream synchronize on every frame and measure that instead.
constexpr std::uint64_t kCheckEvery = 64;

constexpr double kZeroCopyP50Us = 20, kZeroCopyP99Us = 60;  // borrowed slot, 1080p
constexpr double kCopyInFactor = 1.2;  // copy-in p50 <= this x (futex one-way + bare copy) p50
constexpr double kFpsTarget = 20'000;  // 1080p, one consumer

// Odd multiplier: consecutive seqs (and a slot's previous frame, `slots` seqs back) differ.
std::uint8_t fill_byte(std::uint64_t seq) {
  return static_cast<std::uint8_t>(seq * 0x9Du + 0x3Bu);
}

// Frames whose payload is written (copy-in: into the source) and checked: the first, the last and
// every kCheckEvery-th.
bool sampled(const Scenario& s, std::uint64_t seq) {
  return seq == 1 || seq % kCheckEvery == 0 || seq == s.total();
}

std::uint64_t sampled_count(const Scenario& s) {
  std::uint64_t n = 0;
  for (std::uint64_t seq = 1; seq <= s.total(); ++seq) n += sampled(s, seq) ? 1 : 0;
  return n;
}

cu::ContextPtr device_context() {
  CUdevice dev = 0;
  cu::check(cu::driver().cuDeviceGet(&dev, kDevice), "cuDeviceGet");
  return cu::Context::primary(dev);
}

cudaipc::CudaExportMode export_mode(const std::string& variant) {
  if (variant == "vmm") return cudaipc::CudaExportMode::vmm;
  if (variant == "legacy") return cudaipc::CudaExportMode::legacy;
  return cudaipc::CudaExportMode::automatic;
}

class CudaProducer final : public ProducerSide {
 public:
  explicit CudaProducer(const Scenario& s) : s_(s), ctx_(device_context()) {
    if (s.producer_mode == ProducerMode::copy_in) src_ = cu::make_device_allocation(ctx_, s.bytes);
  }
  // The source must not be freed under a copy still queued on the channel's stream.
  ~CudaProducer() override {
    if (!stream_) return;
    cu::ScopedContext current(ctx_->get(), std::nothrow);
    cu::loaded_driver().cuStreamSynchronize(stream_);
  }

  cudaipc::PublishStatus produce(cudaipc::Producer& p, std::uint64_t seq) override {
    const bool write = s_.payload == Payload::verify;
    stream_ = static_cast<CUstream>(p.cuda_stream());
    if (s_.producer_mode == ProducerMode::copy_in) {
      // Rewriting the source only for checked frames keeps the other frames at exactly one copy;
      // on the channel's stream, the memset is ordered after the previous frame's copy.
      if (write && sampled(s_, seq)) {
        cu::ScopedContext current(ctx_->get());
        cu::check(cu::driver().cuMemsetD8Async(src_.get(), fill_byte(seq), s_.bytes, stream_),
                  "cuMemsetD8Async (source)");
      }
      return p.publish(reinterpret_cast<const void*>(src_.get()), s_.bytes, {}, true);
    }
    cudaipc::PublishStatus st;
    cudaipc::WriteSlot slot = p.begin_frame(&st);
    if (!slot) return st;
    if (write) {
      // The stream already waits for every consumer's last read of this slot (begin_frame), and
      // commit queues the ready semaphore writes after this.
      cu::ScopedContext current(ctx_->get());
      cu::check(cu::driver().cuMemsetD8Async(slot.address(), fill_byte(seq), s_.bytes, stream_),
                "cuMemsetD8Async (slot)");
    }
    p.commit(slot);
    return cudaipc::PublishStatus::published;
  }

 private:
  Scenario s_;
  cu::ContextPtr ctx_;
  cu::DeviceAllocation src_;
  CUstream stream_ = nullptr;
};

class CudaConsumer final : public ConsumerSide {
 public:
  CudaConsumer(const Scenario& s, cudaipc::Consumer& c) : s_(s), c_(c), ctx_(device_context()) {
    cu::ScopedContext current(ctx_->get());
    void* p = nullptr;
    cu::check(cu::driver().cuMemAllocHost(&p, kWords * 4), "cuMemAllocHost");
    host_ = static_cast<std::uint8_t*>(p);
  }
  ~CudaConsumer() override {
    cu::ScopedContext current(ctx_->get(), std::nothrow);
    cu::loaded_driver().cuMemFreeHost(host_);
  }

  bool check(const cudaipc::Frame& f) override {
    if (f.size() != s_.bytes) return false;
    const std::uint64_t seq = f.seq();
    const bool verify = s_.payload == Payload::verify && sampled(s_, seq) && f.size() >= 4;
    // The last frame is waited for even unchecked: frames/s then counts the GPU's work, not only
    // the enqueueing of it.
    if (!verify && seq != s_.total()) return true;
    const auto stream = static_cast<CUstream>(c_.cuda_stream());
    if (!stream) {
      std::fprintf(stderr, "consumer: frame %llu but no CUDA stream\n",
                   static_cast<unsigned long long>(seq));
      return false;
    }
    const cu::Driver& d = cu::driver();
    cu::ScopedContext current(ctx_->get());
    const CUdeviceptr base = f.slot_address() + f.desc().tensor.byte_offset;
    const std::uint64_t bytes = f.size();
    const std::uint64_t offsets[kWords] = {0, bytes / 3, 2 * (bytes / 3), bytes - 4};
    // On the consumer's stream, behind the wait on the ready semaphore that next()
    // enqueued: these reads see the slot exactly as a consumer kernel would.
    if (verify)
      for (std::size_t i = 0; i < kWords; ++i)
        cu::check(d.cuMemcpyDtoHAsync(host_ + 4 * i, base + offsets[i], 4, stream),
                  "cuMemcpyDtoHAsync");
    // Polled with back-off, not cuStreamSynchronize: the driver's default sync spins a core for as
    // long as the GPU is behind, which would bill GPU time to the channel's consumer CPU.
    if (!cu::drain(stream, std::chrono::seconds(10))) {
      std::fprintf(stderr, "consumer: frame %llu: the stream did not drain in 10 s\n",
                   static_cast<unsigned long long>(seq));
      return false;
    }
    cu::check(d.cuStreamQuery(stream), "cuStreamQuery (after the frame's reads)");
    if (!verify) return true;
    const std::uint8_t want = fill_byte(seq);
    for (std::size_t i = 0; i < kWords * 4; ++i)
      if (host_[i] != want) {
        std::fprintf(stderr, "consumer: frame %llu byte %llu is 0x%02x, expected 0x%02x\n",
                     static_cast<unsigned long long>(seq),
                     static_cast<unsigned long long>(offsets[i / 4] + i % 4), host_[i], want);
        return false;
      }
    return true;
  }

 private:
  static constexpr std::size_t kWords = 4;
  Scenario s_;
  cudaipc::Consumer& c_;
  cu::ContextPtr ctx_;
  std::uint8_t* host_ = nullptr;  // page-locked, so the 4-byte reads are true async copies
};

class CudaBackend final : public Backend {
 public:
  const char* name() const override { return "cuda"; }
  bool available(std::string* why) const override { return cu::driver_available(why); }
  void configure(const Scenario& s, cudaipc::ProducerOptions& o) const override {
    o.memory = cudaipc::MemoryKind::cuda;
    o.cuda.device = kDevice;
    o.cuda.export_mode = export_mode(s.variant);
  }
  void configure(const Scenario&, cudaipc::ConsumerOptions& o) const override {
    o.cuda.device = kDevice;
  }
  std::unique_ptr<ProducerSide> producer_side(const Scenario& s) const override {
    return std::make_unique<CudaProducer>(s);
  }
  std::unique_ptr<ConsumerSide> consumer_side(const Scenario& s,
                                              cudaipc::Consumer& c) const override {
    return std::make_unique<CudaConsumer>(s, c);
  }
};

const CudaBackend cuda_backend;
const BackendRegistrar backend_registrar(&cuda_backend);

// ---- the section ----

std::string size_label(std::uint64_t bytes) {
  if (bytes == k1080pRgbaU8) return "1080p RGBA u8";
  if (bytes == k4kRgbaF32) return "4K RGBA f32";
  return std::to_string(bytes) + " B";
}

struct CopyFloor {
  bool ok = false;
  std::uint64_t batches = 0;
  double p50_us = 0, p99_us = 0;  // per copy, from batches of back-to-back copies
  double single_p50_us = 0;       // one copy + synchronize: adds launch and wake-up
};

// cuMemcpyDtoDAsync + cuStreamSynchronize: the driver table has no synchronous cuMemcpyDtoD and
// no cuEventElapsedTime, and the synchronize around a batch amortises to the same per-copy time.
CopyFloor measure_copy(std::uint64_t bytes, bool quick) {
  constexpr int kBatch = 20;
  const int batches = quick ? 10 : 50, singles = quick ? 20 : 200;
  CopyFloor r;
  cu::ContextPtr ctx = device_context();
  cu::DeviceAllocation src = cu::make_device_allocation(ctx, bytes);
  cu::DeviceAllocation dst = cu::make_device_allocation(ctx, bytes);
  cu::Stream stream = cu::make_stream(ctx);
  cu::ScopedContext current(ctx->get());
  const cu::Driver& d = cu::driver();
  const CUstream st = stream.get();
  auto copy = [&] {
    cu::check(d.cuMemcpyDtoDAsync(dst.get(), src.get(), bytes, st), "cuMemcpyDtoDAsync");
  };
  auto sync = [&] { cu::check(d.cuStreamSynchronize(st), "cuStreamSynchronize"); };
  // Touch both buffers and warm the copy path, so first-use costs stay out of the samples.
  cu::check(d.cuMemsetD8Async(src.get(), 1, bytes, st), "cuMemsetD8Async");
  cu::check(d.cuMemsetD8Async(dst.get(), 2, bytes, st), "cuMemsetD8Async");
  for (int i = 0; i < 5; ++i) copy();
  sync();
  std::vector<std::uint64_t> per_copy, single;
  for (int b = 0; b < batches; ++b) {
    const std::uint64_t t0 = mono_ns();
    for (int i = 0; i < kBatch; ++i) copy();
    sync();
    per_copy.push_back((mono_ns() - t0) / kBatch);
  }
  for (int i = 0; i < singles; ++i) {
    const std::uint64_t t0 = mono_ns();
    copy();
    sync();
    single.push_back(mono_ns() - t0);
  }
  r.batches = per_copy.size();
  r.p50_us = percentile(per_copy, 0.50) / 1e3;
  r.p99_us = percentile(per_copy, 0.99) / 1e3;
  r.single_p50_us = percentile(single, 0.50) / 1e3;
  r.ok = true;
  return r;
}

// Defaults give the 1080p p99 a few thousand samples and the frames/s phase a quarter second at
// the 20 000 frames/s target; 4K frames take ~100 us of copy each, so fewer.
void apply_counts(const RunOptions& o, Scenario& s) {
  const bool small = s.bytes <= (16u << 20);
  s.warmup = small ? 64 : 16;
  s.samples = small ? 2000 : 300;
  s.frames = small ? 5000 : 1000;
  if (o.quick) {
    s.samples = std::max<std::uint64_t>(s.samples / 10, 30);
    s.frames = std::max<std::uint64_t>(s.frames / 10, 64);
  }
  if (o.samples) s.samples = o.samples;
  if (o.frames) s.frames = o.frames;
  if (o.warmup) s.warmup = o.warmup;
}

std::string device_description() {
  const cu::Driver& d = cu::driver();
  CUdevice dev = 0;
  cu::check(d.cuDeviceGet(&dev, kDevice), "cuDeviceGet");
  char name[256] = {};
  cu::check(d.cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName");
  return "CUDA device " + std::to_string(kDevice) + " (" + name + "), driver API " +
         std::to_string(d.version);
}

const char* met(bool ok) {
  return ok ? "MET" : "MISSED";
}

class CudaSection final : public Section {
 public:
  const char* name() const override { return "cuda"; }

  bool run(const RunOptions& o, const FloorResult& futex, const std::string& dir,
           int& index) const override {
    std::string why;
    if (!cu::driver_available(&why)) {
      std::printf("\nGPU section skipped: %s\n", why.c_str());
      return true;
    }
    const std::vector<std::uint64_t> sizes =
        o.gpu_sizes.empty() ? std::vector<std::uint64_t>{k1080pRgbaU8, k4kRgbaF32} : o.gpu_sizes;
    const std::vector<std::string> exports =
        o.exports.empty() ? std::vector<std::string>{"vmm", "legacy"} : o.exports;
    const std::vector<ProducerMode> modes =
        o.modes_set ? o.modes
                    : std::vector<ProducerMode>{ProducerMode::borrowed, ProducerMode::copy_in};
    bool ok = true;
    std::printf("\nGPU: %s\n", device_description().c_str());

    std::vector<CopyFloor> copies;
    std::printf(
        "\nbare copy floor (cuMemcpyDtoDAsync in one process; batches of 20 back-to-back copies "
        "between stream synchronizes)\n"
        "| size | bytes | per-copy p50 us | p99 us | GB/s at p50 | copy+sync p50 us |\n"
        "|---|---|---|---|---|---|\n");
    for (std::uint64_t size : sizes) {
      CopyFloor c;
      try {
        c = measure_copy(size, o.quick);
      } catch (const std::exception& e) {
        std::printf("| %s | %llu | failed: %s | | | |\n", size_label(size).c_str(),
                    static_cast<unsigned long long>(size), e.what());
      }
      ok = ok && c.ok;
      if (c.ok)
        std::printf("| %s | %llu | %.1f | %.1f | %.0f | %.1f |\n", size_label(size).c_str(),
                    static_cast<unsigned long long>(size), c.p50_us, c.p99_us,
                    c.p50_us > 0 ? static_cast<double>(size) / (c.p50_us * 1e3) : 0.0,
                    c.single_p50_us);
      copies.push_back(c);
      std::fflush(stdout);
    }

    std::printf(
        "\nGPU memory (%u slots; latency: publish -> next() returned, i.e. slot held and the "
        "consumer stream's wait on the ready semaphore enqueued, paced, %llu us idle, consumers "
        "pooled; frames/s: slowest consumer at full speed, up to its stream finishing the last "
        "frame; data checked on frame 1, every %llu-th and the last)\n",
        o.slots, static_cast<unsigned long long>(o.gap_us),
        static_cast<unsigned long long>(kCheckEvery));
    std::printf(
        "| export | producer | size | cons | samples | p50 us | p99 us | frames/s | prod CPU "
        "us/f | cons CPU us/f | cons CPU us/f paced | checked |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    std::fflush(stdout);
    std::vector<ScenarioResult> results;
    for (const auto& ex : exports)
      for (ProducerMode m : modes)
        for (std::uint64_t size : sizes)
          for (std::uint32_t n : o.consumers) {
            Scenario s;
            s.backend = "cuda";
            s.variant = ex;
            s.label = size_label(size);
            s.bytes = size;
            s.consumers = n;
            s.slots = o.slots;
            s.payload = Payload::verify;
            s.producer_mode = m;
            s.gap_us = o.gap_us;
            s.pin = o.pin;
            apply_counts(o, s);
            ScenarioResult r = run_scenario(s, dir, index++);
            ok = ok && r.ok;
            std::string checked = std::to_string(sampled_count(s) * n);
            if (r.bad) checked += " (" + std::to_string(r.bad) + " BAD)";
            if (!r.ok) checked += " FAILED";
            std::printf(
                "| %s | %s | %s | %u | %llu | %.1f | %.1f | %.0f | %.2f | %.2f | %.2f | %s |\n",
                ex.c_str(), producer_mode_name(m), s.label.c_str(), n,
                static_cast<unsigned long long>(r.lat_n), r.lat_p50_us, r.lat_p99_us, r.fps,
                r.prod_cpu_us, r.cons_cpu_us, r.cons_cpu_paced_us, checked.c_str());
            std::fflush(stdout);
            results.push_back(r);
          }

    std::printf("\nGPU targets (reported, not asserted)\n");
    for (const auto& r : results)
      if (r.s.bytes == k1080pRgbaU8 && r.s.producer_mode == ProducerMode::borrowed)
        std::printf(
            "- zero-copy p50 <= %.0f us and p99 <= %.0f us, 1080p, %s, %u cons: %.1f / "
            "%.1f us: %s\n",
            kZeroCopyP50Us, kZeroCopyP99Us, r.s.variant.c_str(), r.s.consumers, r.lat_p50_us,
            r.lat_p99_us,
            met(r.ok && r.lat_p50_us <= kZeroCopyP50Us && r.lat_p99_us <= kZeroCopyP99Us));
    for (const auto& r : results) {
      if (r.s.producer_mode != ProducerMode::copy_in) continue;
      const auto at = std::find(sizes.begin(), sizes.end(), r.s.bytes) - sizes.begin();
      const CopyFloor& c = copies[static_cast<std::size_t>(at)];
      if (!o.floor || futex.oneway_p50_us <= 0 || !c.ok) {
        std::printf("- copy-in, %s, %s, %u cons: no floor to compare with\n", r.s.label.c_str(),
                    r.s.variant.c_str(), r.s.consumers);
        continue;
      }
      const double bound = kCopyInFactor * (futex.oneway_p50_us + c.p50_us);
      std::printf(
          "- copy-in p50 <= %.1fx (futex one-way %.1f + copy %.1f us) = %.1f us, %s, %s, "
          "%u cons: %.1f us: %s\n",
          kCopyInFactor, futex.oneway_p50_us, c.p50_us, bound, r.s.label.c_str(),
          r.s.variant.c_str(), r.s.consumers, r.lat_p50_us, met(r.ok && r.lat_p50_us <= bound));
    }
    for (const auto& r : results)
      if (r.s.bytes == k1080pRgbaU8 && r.s.consumers == 1)
        std::printf("- >= %.0f frames/s, 1080p, 1 consumer, %s, %s: %.0f frames/s: %s\n",
                    kFpsTarget, r.s.variant.c_str(), producer_mode_name(r.s.producer_mode), r.fps,
                    met(r.ok && r.fps >= kFpsTarget));
    return ok;
  }
};

const CudaSection cuda_section;
const SectionRegistrar section_registrar(&cuda_section);

}  // namespace
}  // namespace bench
