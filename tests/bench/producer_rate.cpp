// cudaipc-bench-producer-rate: the native producer beside which python/bench/consumer_overhead.py
// puts the Python producer (publish(tensor) and frame()), in the same run, on a channel a consumer
// process drains. Publishes N frames of WxH RGBA and prints one parseable line:
//   producer-rate mode=M frames=N fps=F p50_us=A p99_us=B
// Per-frame times are this thread's CPU time, as in the Python bench, so the rows compare.
//   copy-in:  publish() of a device buffer (host buffer for host channels), the copy queued on
//             the producer's stream after `--source-stream`'s work (write_after), as
//             Producer.publish(tensor) does;
//   borrowed: begin_frame(), order_after_writes, a device copy into the slot on the caller's
//             stream (memcpy for host), write_after, commit: what Producer.frame() does with
//             torch.from_dlpack(slot).copy_(src).
//   cudaipc-bench-producer-rate --path=PATH [--memory=cuda|host] [--mode=copy-in|borrowed]
//                               [--frames=2000] [--width=1920] [--height=1080] [--consumers=1]
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cudaipc/producer.hpp"
#include "rate_util.hpp"
#ifdef CUDAIPC_BENCH_CUDA
#include "cuda/cuda_handles.hpp"
#include "cuda/driver.hpp"
#endif

namespace {

using cudaipc::bench::parse_count;
using cudaipc::bench::pct_us;
using cudaipc::bench::thread_cpu_ns;

// Where a frame's bytes come from, and the stream a caller would have computed them on.
struct Source {
  std::vector<std::uint8_t> host;
#ifdef CUDAIPC_BENCH_CUDA
  cudaipc::cuda::ContextPtr ctx;
  cudaipc::cuda::Stream stream;
  cudaipc::cuda::DeviceAllocation device;
#endif
  const void* data = nullptr;
  void* caller_stream = nullptr;
};

void copy_into(Source& src, std::uintptr_t slot, std::uint64_t bytes, bool cuda) {
  if (!cuda) {
    std::memcpy(reinterpret_cast<void*>(slot), src.data, bytes);
    return;
  }
#ifdef CUDAIPC_BENCH_CUDA
  cudaipc::cuda::ScopedContext current(src.ctx->get());
  cudaipc::cuda::check(cudaipc::cuda::driver().cuMemcpyDtoDAsync(
                           slot, reinterpret_cast<CUdeviceptr>(src.data), bytes, src.stream.get()),
                       "cuMemcpyDtoDAsync");
#endif
}

int run(int argc, char** argv) {
  std::string path, memory = "cuda", mode = "copy-in";
  std::uint64_t frames = 2000, width = 1920, height = 1080, consumers = 1, warmup = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto eq = a.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("unknown argument " + a);
    const std::string key = a.substr(0, eq);
    const char* value = argv[i] + eq + 1;
    if (key == "--path") {
      path = value;
    } else if (key == "--memory") {
      memory = value;
    } else if (key == "--mode") {
      mode = value;
    } else if (key == "--frames") {
      frames = parse_count(a, value);
    } else if (key == "--width") {
      width = parse_count(a, value);
    } else if (key == "--height") {
      height = parse_count(a, value);
    } else if (key == "--consumers") {
      consumers = std::strtoull(value, nullptr, 10);
    } else {
      throw std::invalid_argument("unknown argument " + a);
    }
  }
  if (path.empty()) throw std::invalid_argument("--path=PATH is needed");
  if (mode != "copy-in" && mode != "borrowed")
    throw std::invalid_argument("--mode is copy-in or borrowed");
  const bool cuda = memory == "cuda";
#ifndef CUDAIPC_BENCH_CUDA
  if (cuda) throw std::invalid_argument("this build has no CUDA backend: --memory=host");
#endif
  const std::uint64_t bytes = width * height * 4;

  cudaipc::ProducerOptions opts;
  opts.path = path;
  opts.slots = 4;
  opts.memory = cuda ? cudaipc::MemoryKind::cuda : cudaipc::MemoryKind::host;
  opts.on_full = cudaipc::FullPolicy::drop;
  cudaipc::Producer producer(opts);
  cudaipc::Format fmt;
  fmt.caps = "video/x-raw,format=RGBA,width=" + std::to_string(width) +
             ",height=" + std::to_string(height) + ",framerate=0/1";
  fmt.tensor = cudaipc::make_tensor(cudaipc::DType::uint8, {static_cast<std::int64_t>(height),
                                                            static_cast<std::int64_t>(width), 4});
  producer.set_format(fmt);

  Source src;
  if (cuda) {
#ifdef CUDAIPC_BENCH_CUDA
    src.ctx = cudaipc::cuda::Context::primary(producer.cuda_device());
    src.stream = cudaipc::cuda::make_stream(src.ctx);
    src.device = cudaipc::cuda::make_device_allocation(src.ctx, bytes);
    cudaipc::cuda::ScopedContext current(src.ctx->get());
    cudaipc::cuda::check(
        cudaipc::cuda::driver().cuMemsetD8Async(src.device.get(), 7, bytes, src.stream.get()),
        "cuMemsetD8Async");
    src.data = reinterpret_cast<const void*>(src.device.get());
    src.caller_stream = src.stream.get();
#endif
  } else {
    src.host.assign(bytes, 7);
    src.data = src.host.data();
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (producer.consumer_count() < consumers) {
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("no consumer joined within 60 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }

  auto one = [&] {
    if (mode == "copy-in") {
      producer.write_after(src.caller_stream);
      producer.publish(src.data, bytes, {}, cuda);
      return;
    }
    cudaipc::PublishStatus st;
    cudaipc::WriteSlot ws = producer.begin_frame(&st);
    if (!ws) return;
    producer.order_after_writes(src.caller_stream);
    copy_into(src, ws.address(), bytes, cuda);
    producer.write_after(src.caller_stream);
    producer.commit(ws);
  };
  for (std::uint64_t i = 0; i < warmup; ++i) one();
  std::vector<std::uint64_t> cpu;
  cpu.reserve(frames);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t i = 0; i < frames; ++i) {
    const std::uint64_t s = thread_cpu_ns();
    one();
    cpu.push_back(thread_cpu_ns() - s);
    // Paced like the Python rows (a frame per 0.5 ms), so the consumer keeps up.
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  producer.end_of_stream();
  std::printf("producer-rate mode=%s frames=%llu fps=%.0f p50_us=%.1f p99_us=%.1f\n", mode.c_str(),
              static_cast<unsigned long long>(frames), frames / secs, pct_us(cpu, 0.5),
              pct_us(cpu, 0.99));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return cudaipc::bench::rate_main("cudaipc-bench-producer-rate", [&] { return run(argc, argv); });
}
