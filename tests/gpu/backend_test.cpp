// The CUDA memory backend on its own, in one process: driver loading and error reporting, a
// producer and a consumer memory joined directly (slots written and checked on the GPU), every
// write path, the ordering both ways, a caller's context and stream, and hostile input.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "clock.hpp"
#include "conn_page.hpp"
#include "cuda/cuda_handles.hpp"
#include "cuda/driver.hpp"
#include "cuda/ipc_table.hpp"
#include "cuda/semaphores.hpp"
#include "cudaipc/error.hpp"
#include "gpu_support.hpp"
#include "mapping.hpp"
#include "memory_backend.hpp"
#include "pattern.hpp"
#include "process_watch.hpp"
#include "retire.hpp"

namespace cudaipc {
namespace {

using gputest::Kernels;

constexpr std::uint64_t kSize = (1u << 20) + 13;  // odd: the byte tail is checked too
constexpr std::uint64_t kSpinNs = 1'000'000;

const char* mode_name(CudaExportMode m) {
  return m == CudaExportMode::vmm ? "vmm" : m == CudaExportMode::legacy ? "legacy" : "auto";
}

CudaOptions with_mode(CudaExportMode m) {
  CudaOptions o;
  o.export_mode = m;
  return o;
}

// No deadline for a cpu_wait on the frame.
constexpr std::uint64_t kForever = ~std::uint64_t{0};

// One connection page mapped twice, as the producer and the consumer each map it: the same memfd
// at two addresses, each side registering its own mapping with the driver.
struct SharedPage {
  UniqueFd fd;
  std::shared_ptr<Mapping> producer_side;
  Mapping consumer_side;
  SharedPage() {
    fd = make_memfd("cudaipc-test-page", 4096);
    producer_side = std::make_shared<Mapping>(fd.get(), 4096, true);
    consumer_side = Mapping(fd.get(), 4096, true);
    auto* page = static_cast<ConnPage*>(producer_side->data());
    page->page_size = 4096;
  }
  ConnPage* producer_page() const { return static_cast<ConnPage*>(producer_side->data()); }
  ConnPage* consumer_page() const { return static_cast<ConnPage*>(consumer_side.data()); }
};

// An environment variable set (or, with nullptr, unset) for this object's life, then put back.
class EnvSet {
 public:
  EnvSet(const char* name, const char* value) : name_(name) {
    if (const char* was = std::getenv(name)) was_ = was;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~EnvSet() {
    if (was_)
      ::setenv(name_, was_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  EnvSet(const EnvSet&) = delete;
  EnvSet& operator=(const EnvSet&) = delete;

 private:
  const char* name_;
  std::optional<std::string> was_;
};

// Joins a consumer memory to a producer memory the way the core does, through `page`.
void join(ProducerMemory& producer, ConsumerMemory& consumer, std::uint32_t id,
          const SharedPage& page) {
  consumer.import_sync(producer.export_sync());
  consumer.attach_page(page.consumer_page(), 4096, -1);
  producer.attach_consumer(id, consumer.export_sync(), page.producer_page(), 4096,
                           page.producer_side);
}

// A producer memory and a consumer memory in this process, joined the way the core joins them.
struct Joined {
  SharedPage page;
  std::unique_ptr<ProducerMemory> producer;
  std::unique_ptr<ConsumerMemory> consumer;
  std::unique_ptr<ProducerSlots> slots;
  std::shared_ptr<ConsumerSlots> imported;

  Joined(const CudaOptions& p, const CudaOptions& c, std::uint32_t count, std::uint64_t size) {
    producer = make_cuda_producer_memory(p, count);
    consumer = make_cuda_consumer_memory(c, count);
    join(*producer, *consumer, 0, page);
    slots = producer->allocate(count, size);
    imported = consumer->import_slots(count, size, slots->export_slots());
  }
  // The consumer set goes first, as the core drops it: frames hold imports, not the reverse.
  ~Joined() {
    imported.reset();
    if (consumer) consumer->close();
    consumer.reset();
    if (producer) producer->detach_consumer(0, UniqueFd());
  }
  // Frame `key` written into `slot` by a kernel on the producer's stream, between the hooks.
  void write_frame(Kernels& k, std::uint32_t slot, std::uint64_t key, std::uint64_t size) {
    producer->begin_write(slot);
    k.fill(pstream(), slots->address(slot), size, key);
    producer->end_write(slot, key);
  }
  CUstream pstream() const { return static_cast<CUstream>(producer->stream()); }
  CUstream cstream() const { return static_cast<CUstream>(consumer->stream()); }
};

WireBlob copy(const WireBlob& b) {
  WireBlob c;
  c.bytes = b.bytes;
  for (const auto& fd : b.fds) c.fds.push_back(dup_fd(fd.get()));
  return c;
}

template <typename T>
WireBlob patched(const WireBlob& b, std::size_t offset, T value) {
  WireBlob c = copy(b);
  std::memcpy(c.bytes.data() + offset, &value, sizeof value);
  return c;
}

template <typename F>
Errc error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return Errc::ok;
}

std::vector<std::uint8_t> read_back(const Kernels& k, CUdeviceptr src, std::uint64_t bytes) {
  std::vector<std::uint8_t> host(bytes);
  const cuda::Driver& d = cuda::driver();
  cuda::ScopedContext current(k.context()->get());
  cuda::check(d.cuMemcpyDtoHAsync(host.data(), src, bytes, k.own_stream()), "cuMemcpyDtoHAsync");
  cuda::check(d.cuStreamSynchronize(k.own_stream()), "cuStreamSynchronize");
  return host;
}

// ---- the process-wide IPC table (no GPU needed) ----------------------------------------------

// Counts how many values are alive, so the tests see exactly when the table frees one.
struct Probe {
  int id;
  std::shared_ptr<int> alive;
  Probe(int i, std::shared_ptr<int> a) : id(i), alive(std::move(a)) { ++*alive; }
  Probe(Probe&& o) noexcept : id(o.id), alive(std::move(o.alive)) {}
  Probe(const Probe&) = delete;
  ~Probe() {
    if (alive) --*alive;
  }
};

cuda::IpcKey key(unsigned char b) {
  cuda::IpcKey k{};
  k.fill(b);
  return k;
}

TEST(IpcTable, ImportsOfOneHandleShareOneOpenUntilTheLastReferenceGoes) {
  cuda::IpcTable<Probe> table;
  auto alive = std::make_shared<int>(0);
  int opens = 0;
  auto open = [&] { return Probe(++opens, alive); };
  auto a = table.get_or_open(key(1), open);
  auto b = table.get_or_open(key(1), open);
  EXPECT_EQ(opens, 1);
  EXPECT_EQ(b->id, 1);
  auto moved = std::move(a);
  EXPECT_FALSE(a);
  moved.reset();
  EXPECT_EQ(*alive, 1);
  b.reset();
  EXPECT_EQ(*alive, 0);
  auto c = table.get_or_open(key(1), open);  // closed, so opened again
  EXPECT_EQ(opens, 2);
  auto d = table.get_or_open(key(2), open);  // another handle, another open
  EXPECT_EQ(opens, 3);
  EXPECT_EQ(*alive, 2);
}

TEST(IpcTable, AnImporterInTheExportingProcessGetsTheExport) {
  cuda::IpcTable<Probe> table;
  auto alive = std::make_shared<int>(0);
  auto never = [&]() -> Probe { throw std::logic_error("opened a handle this process exported"); };
  auto exported = table.add(key(3), Probe(30, alive));
  auto imported = table.get_or_open(key(3), never);
  EXPECT_EQ(imported->id, 30);
  exported.reset();
  EXPECT_EQ(*alive, 1);  // the importer still uses it
  imported.reset();
  EXPECT_EQ(*alive, 0);
}

TEST(IpcTable, AHandleExportedAgainNamesTheNewObject) {
  cuda::IpcTable<Probe> table;
  auto alive = std::make_shared<int>(0);
  auto never = [&]() -> Probe { throw std::logic_error("opened a handle this process exported"); };
  auto old_export = table.add(key(4), Probe(40, alive));
  auto old_import = table.get_or_open(key(4), never);
  auto new_export = table.add(key(4), Probe(41, alive));
  auto new_import = table.get_or_open(key(4), never);
  EXPECT_EQ(old_import->id, 40);
  EXPECT_EQ(new_import->id, 41);
  old_export.reset();
  old_import.reset();
  EXPECT_EQ(*alive, 1);
  EXPECT_EQ(table.get_or_open(key(4), never)->id, 41);
  new_export.reset();
  new_import.reset();
  EXPECT_EQ(*alive, 0);
}

// ---- driver ------------------------------------------------------------------------------------

TEST(CudaDriver, MissingDriverIsReportedWithItsReason) {
  std::string why;
  if (cuda::driver_available(&why))
    GTEST_SKIP() << "a CUDA driver and device are present: nothing to report missing";
  EXPECT_FALSE(why.empty());
  for (int side = 0; side < 2; ++side) {
    try {
      if (side == 0)
        make_cuda_producer_memory({}, 4);
      else
        make_cuda_consumer_memory({}, 4);
      ADD_FAILURE() << "CUDA memory was made without a driver";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::no_cuda);
      EXPECT_EQ(std::string(e.what()), why);
    }
  }
  std::printf("reported: %s\n", why.c_str());
}

TEST(CudaDriver, EveryEntryPointIsResolved) {
  CUDAIPC_REQUIRE_GPU();
  const cuda::Driver& d = cuda::driver();
  EXPECT_GE(d.version, 12000);
#define CUDAIPC_EXPECT_RESOLVED(name, version) \
  EXPECT_NE(reinterpret_cast<void*>(d.name), nullptr) << #name;
  CUDAIPC_DRIVER_FUNCTIONS(CUDAIPC_EXPECT_RESOLVED)
#undef CUDAIPC_EXPECT_RESOLVED
  EXPECT_EQ(cuda::error_text(CUDA_ERROR_OUT_OF_MEMORY), "CUDA_ERROR_OUT_OF_MEMORY (out of memory)");
}

TEST(CudaDriver, GpuPatternMatchesTheHostPattern) {
  CUDAIPC_REQUIRE_GPU();
  Kernels k;
  cuda::DeviceAllocation buf = cuda::make_device_allocation(k.context(), kSize);
  k.fill(k.own_stream(), buf.get(), kSize, 77);
  const auto host = read_back(k, buf.get(), kSize);
  EXPECT_EQ(testing::check_pattern(host.data(), kSize, 77), kSize);
  k.verify(k.own_stream(), buf.get(), kSize, 77);
  EXPECT_EQ(k.counters(k.own_stream()).bad, 0u);
  k.verify(k.own_stream(), buf.get(), kSize, 78);  // and the checker does notice a wrong frame
  EXPECT_GT(k.counters(k.own_stream()).bad, 0u);
}

TEST(CudaDriver, BadArgumentsAndFailedCallsSayWhat) {
  CUDAIPC_REQUIRE_GPU();
  CudaOptions o;
  o.device = 999;
  EXPECT_EQ(error_of([&] { make_cuda_producer_memory(o, 4); }), Errc::invalid_argument);
  EXPECT_EQ(error_of([&] { make_cuda_consumer_memory(o, 4); }), Errc::invalid_argument);
  EXPECT_EQ(error_of([&] { make_cuda_producer_memory({}, 0); }), Errc::invalid_argument);
  // An allocation far beyond any GPU: the driver's refusal comes back named.
  for (CudaExportMode m : {CudaExportMode::vmm, CudaExportMode::legacy}) {
    auto p = make_cuda_producer_memory(with_mode(m), 1);
    try {
      p->allocate(1, std::uint64_t{1} << 44);
      ADD_FAILURE() << "a 16 TiB allocation succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::cuda);
      const std::string call = m == CudaExportMode::vmm ? "cuMemCreate" : "cuMemAlloc";
      EXPECT_EQ(std::string(e.what()).rfind(call + " failed: CUDA_ERROR_", 0), 0u) << e.what();
      std::printf("%s: %s\n", mode_name(m), e.what());
    }
  }
}

TEST(CudaDriver, ConsumerFollowingTheProducerExportsOnlyAfterImport) {
  CUDAIPC_REQUIRE_GPU();
  auto c = make_cuda_consumer_memory({}, 4);
  EXPECT_EQ(c->stream(), nullptr);
  EXPECT_EQ(error_of([&] { c->export_sync(); }), Errc::invalid_argument);
}

// ---- one producer and one consumer memory in this process ---------------------------------------

class CudaBackend : public ::testing::TestWithParam<CudaExportMode> {};

TEST_P(CudaBackend, RoundTripEveryByteVerifiedOnTheGpu) {
  CUDAIPC_REQUIRE_GPU();
  Kernels k;
  Joined j(with_mode(GetParam()), {}, 4, kSize);
  ASSERT_EQ(j.slots->count(), 4u);
  ASSERT_EQ(j.imported->count(), 4u);
  ASSERT_EQ(j.imported->slot_size(), kSize);
  for (std::uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(j.slots->address(i) % 4096, 0u);
    EXPECT_GE(j.slots->address(i) + kSize, j.slots->address(i));
    if (i) {
      EXPECT_GE(j.imported->address(i) - j.imported->address(i - 1), kSize);
    }
  }
  const std::uint64_t frames = gputest::frame_count(400);
  for (std::uint64_t key = 1; key <= frames; ++key) {
    const auto i = static_cast<std::uint32_t>(key % 4);
    j.producer->begin_write(i);
    k.fill(j.pstream(), j.slots->address(i), kSize, key);
    j.producer->end_write(i, key);
    ASSERT_TRUE(j.consumer->on_acquire(i, key, kForever));
    k.verify(j.cstream(), j.imported->address(i), kSize, key);
    j.consumer->on_release(i, key);
  }
  EXPECT_EQ(k.counters(j.cstream()).bad, 0u);
}

// A producer kernel still spinning when the slot is published: the consumer's read, issued at
// once, must wait for it on the GPU (and with cpu_wait, on the CPU).
TEST_P(CudaBackend, ReadWaitsForASlowWrite) {
  CUDAIPC_REQUIRE_GPU();
  for (bool cpu_wait : {false, true}) {
    Kernels k;
    CudaOptions c;
    c.cpu_wait = cpu_wait;
    Joined j(with_mode(GetParam()), c, 2, kSize);
    for (std::uint64_t key = 1; key <= 20; ++key) {
      const auto i = static_cast<std::uint32_t>(key % 2);
      j.producer->begin_write(i);
      k.slow_fill(j.pstream(), j.slots->address(i), kSize, key, kSpinNs);
      j.producer->end_write(i, key);
      ASSERT_TRUE(j.consumer->on_acquire(i, key, kForever));
      k.verify(j.cstream(), j.imported->address(i), kSize, key);
      j.consumer->on_release(i, key);
    }
    EXPECT_EQ(k.counters(j.cstream()).bad, 0u) << "cpu_wait " << cpu_wait;
  }
}

// A consumer kernel still reading when it releases the slot: the producer's next write into that
// slot, issued at once, must wait for it on the GPU.
TEST_P(CudaBackend, WriteWaitsForASlowRead) {
  CUDAIPC_REQUIRE_GPU();
  Kernels k;
  Joined j(with_mode(GetParam()), {}, 1, kSize);
  for (std::uint64_t key = 1; key <= 20; ++key) {
    j.producer->begin_write(0);
    k.fill(j.pstream(), j.slots->address(0), kSize, key);
    j.producer->end_write(0, key);
    ASSERT_TRUE(j.consumer->on_acquire(0, key, kForever));
    k.slow_read(j.cstream(), j.imported->address(0), kSize, key, 2 * kSpinNs);
    j.consumer->on_release(0, key);
  }
  const gputest::Counters c = k.counters(j.cstream());
  EXPECT_EQ(c.bad, 0u);
  EXPECT_EQ(c.changed, 0u);
}

// The GPU semaphore words in the consumer's page of their own (where the driver makes one) and,
// with CUDAIPC_SEMAPHORE_PAGE=registered, in the registered connection page: each way a read
// waits for a slow write and a write for a slow read, every byte checked.
TEST_P(CudaBackend, TheSemaphoreWordsWorkInTheirOwnPageAndInTheConnectionPage) {
  CUDAIPC_REQUIRE_GPU();
  for (const bool registered : {false, true}) {
    SCOPED_TRACE(registered ? "registered connection page" : "own page");
    std::unique_ptr<Kernels> kernels;
    std::unique_ptr<Joined> joined;
    {
      // Only while the consumer joins; what the binary was started with comes back after.
      const EnvSet env("CUDAIPC_SEMAPHORE_PAGE", registered ? "registered" : nullptr);
      kernels = std::make_unique<Kernels>();
      joined = std::make_unique<Joined>(with_mode(GetParam()), CudaOptions{}, 1, kSize);
    }
    Kernels& k = *kernels;
    Joined& j = *joined;
    // The consumer's sync description: magic, version, count, where the words are (+ its fd).
    const WireBlob csync = j.consumer->export_sync();
    std::uint32_t where = 9;
    ASSERT_EQ(csync.bytes.size(), 16u);
    std::memcpy(&where, csync.bytes.data() + 12, sizeof where);
    if (registered) {
      EXPECT_EQ(where, 0u);
      EXPECT_TRUE(csync.fds.empty());
    } else if (where == 0) {
      // Host NUMA allocations came with the 12.2 driver: from there on a refusal is a failure.
      if (cuda::driver().version >= 12020)
        ADD_FAILURE() << "driver " << cuda::driver().version
                      << " made no page for the semaphore words";
      else
        std::printf("note: driver %d makes no shareable host page; the words stay registered\n",
                    cuda::driver().version);
    } else {
      EXPECT_EQ(where, 1u);
      EXPECT_EQ(csync.fds.size(), 1u);
    }
    for (std::uint64_t key = 1; key <= 20; ++key) {
      j.producer->begin_write(0);
      k.slow_fill(j.pstream(), j.slots->address(0), kSize, key, kSpinNs);
      j.producer->end_write(0, key);
      ASSERT_TRUE(j.consumer->on_acquire(0, key, kForever));
      k.slow_read(j.cstream(), j.imported->address(0), kSize, key, kSpinNs);
      j.consumer->on_release(0, key);
    }
    const gputest::Counters c = k.counters(j.cstream());
    EXPECT_EQ(c.bad, 0u);
    EXPECT_EQ(c.changed, 0u);
  }
}

TEST_P(CudaBackend, HostDeviceAnd2dWritesLandIntact) {
  CUDAIPC_REQUIRE_GPU();
  Kernels k;
  Joined j(with_mode(GetParam()), {}, 2, kSize);
  // write() from host memory, and from device memory filled on the producer's stream.
  std::vector<std::uint8_t> host(kSize);
  testing::fill_pattern(host.data(), kSize, 5);
  j.producer->begin_write(0);
  j.producer->write(j.slots->address(0), host.data(), kSize, SourceKind::host);
  j.producer->end_write(0, 1);
  j.producer->flush();
  EXPECT_EQ(testing::check_pattern(read_back(k, j.imported->address(0), kSize).data(), kSize, 5),
            kSize);
  cuda::DeviceAllocation src = cuda::make_device_allocation(k.context(), kSize);
  k.fill(j.pstream(), src.get(), kSize, 6);
  j.producer->begin_write(1);
  j.producer->write(j.slots->address(1), reinterpret_cast<const void*>(src.get()), kSize,
                    SourceKind::device);
  j.producer->end_write(1, 2);
  j.producer->flush();
  EXPECT_EQ(testing::check_pattern(read_back(k, j.imported->address(1), kSize).data(), kSize, 6),
            kSize);

  // write_2d: row r of the source holds the pattern of key r + 1; the slot gets them pitched.
  constexpr std::uint64_t kWidth = 1000, kSrcPitch = 1200, kDstPitch = 1024, kRows = 64;
  std::vector<std::uint8_t> rows(kSrcPitch * kRows, 0xee);
  for (std::uint64_t r = 0; r < kRows; ++r)
    testing::fill_pattern(rows.data() + r * kSrcPitch, kWidth, r + 1);
  cuda::DeviceAllocation rows_dev = cuda::make_device_allocation(k.context(), rows.size());
  for (std::uint64_t r = 0; r < kRows; ++r)
    k.fill(j.pstream(), rows_dev.get() + r * kSrcPitch, kWidth, r + 1);
  std::uint64_t key = 2;
  for (SourceKind from : {SourceKind::host, SourceKind::device}) {
    ++key;
    j.producer->begin_write(0);
    const void* src2d = from == SourceKind::host ? static_cast<const void*>(rows.data())
                                                 : reinterpret_cast<const void*>(rows_dev.get());
    j.producer->write_2d(j.slots->address(0), kDstPitch, src2d, kSrcPitch, kWidth, kRows, from);
    j.producer->end_write(0, key);
    j.producer->flush();
    const auto back = read_back(k, j.imported->address(0), kDstPitch * kRows);
    for (std::uint64_t r = 0; r < kRows; ++r)
      ASSERT_EQ(testing::check_pattern(back.data() + r * kDstPitch, kWidth, r + 1), kWidth)
          << "row " << r << (from == SourceKind::host ? " from host" : " from device");
  }
}

// The driver refuses to open a legacy handle in the process that exported it, and a second time
// in one process: both consumers here must get the producer's own memory through the table.
TEST_P(CudaBackend, TwoConsumersInTheProducersProcessShareTheSlots) {
  CUDAIPC_REQUIRE_GPU();
  Kernels k;
  Joined a(with_mode(GetParam()), {}, 2, kSize);
  auto second = make_cuda_consumer_memory({}, 2);
  SharedPage second_page;
  join(*a.producer, *second, 1, second_page);
  auto imported = second->import_slots(2, kSize, a.slots->export_slots());
  if (GetParam() == CudaExportMode::legacy) {
    EXPECT_EQ(imported->address(0), a.slots->address(0));
    EXPECT_EQ(a.imported->address(0), a.slots->address(0));
  }
  for (std::uint64_t key = 1; key <= 10; ++key) {
    const auto i = static_cast<std::uint32_t>(key % 2);
    a.producer->begin_write(i);
    k.fill(a.pstream(), a.slots->address(i), kSize, key);
    a.producer->end_write(i, key);
    for (ConsumerMemory* c : {a.consumer.get(), second.get()}) {
      ASSERT_TRUE(c->on_acquire(i, key, kForever));
      k.verify(static_cast<CUstream>(c->stream()),
               (c == second.get() ? imported : a.imported)->address(i), kSize, key);
      c->on_release(i, key);
    }
  }
  EXPECT_EQ(k.counters(static_cast<CUstream>(second->stream())).bad, 0u);
  EXPECT_EQ(k.counters(a.cstream()).bad, 0u);
  second->close();
  a.producer->detach_consumer(1, UniqueFd());
}

// Whether `s` still has work it cannot run, a short while after the last call queued some.
bool stuck(CUstream s, const Kernels& k) {
  cuda::ScopedContext current(k.context()->get());
  return !cuda::drain(s, std::chrono::milliseconds(200));
}

// The consumer takes frame 1 from slot 0 and never releases it (its stream never writes `done`);
// the producer then writes frame 2 into that slot, which must wait on the GPU. Returns 2.
std::uint64_t write_past_an_unfinished_read(Joined& j, Kernels& k) {
  j.write_frame(k, 0, 1, kSize);
  EXPECT_TRUE(j.consumer->on_acquire(0, 1, kForever));
  j.write_frame(k, 0, 2, kSize);
  EXPECT_TRUE(stuck(j.pstream(), k)) << "the producer's write did not wait for the reader";
  return 2;
}

// A consumer that took a frame and died before its stream wrote `done`: the producer's next write
// into that slot waits on the GPU for a value that never comes, until the producer, shown the
// death (an exited child's pidfd here), stores it itself.
TEST_P(CudaBackend, AWaitOnAConsumerThatDiedIsReleased) {
  CUDAIPC_REQUIRE_GPU();
  Kernels k;
  Joined j(with_mode(GetParam()), {}, 1, kSize);
  std::uint64_t key = 0;
  ASSERT_NO_FATAL_FAILURE(key = write_past_an_unfinished_read(j, k));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  UniqueFd pidfd = open_pidfd(child);
  ASSERT_TRUE(pidfd) << "this kernel gives no pidfds";
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  j.producer->detach_consumer(0, std::move(pidfd));
  EXPECT_FALSE(stuck(j.pstream(), k)) << "the producer's stream stayed stuck after the death";
  EXPECT_EQ(testing::check_pattern(read_back(k, j.slots->address(0), kSize).data(), kSize, key),
            kSize);
}

// A live consumer whose stream never writes `done` for a frame it took (a kernel that does not
// end, or a page that lies) holds the producer's stream only for the lease timeout: reap() then
// names it for eviction and lets the stream go, and later writes no longer wait for it.
TEST_P(CudaBackend, AReaderThatHoldsASlotTooLongIsReleased) {
  CUDAIPC_REQUIRE_GPU();
  Kernels k;
  Joined j(with_mode(GetParam()), {}, 1, kSize);
  std::uint64_t key = 0;
  ASSERT_NO_FATAL_FAILURE(key = write_past_an_unfinished_read(j, k));
  constexpr std::uint64_t kLimit = 5'000'000'000;
  std::vector<std::uint32_t> stalled;
  j.producer->reap(monotonic_ns(), kLimit, stalled);
  EXPECT_TRUE(stalled.empty()) << "evicted before the lease timeout";
  EXPECT_TRUE(stuck(j.pstream(), k));
  j.producer->reap(monotonic_ns() + kLimit + 1'000'000'000, kLimit, stalled);
  ASSERT_EQ(stalled, std::vector<std::uint32_t>{0});
  EXPECT_FALSE(stuck(j.pstream(), k)) << "the producer's stream stayed stuck";
  // It took frame 2 as well and never reads it: the next write does not wait for it any more.
  ASSERT_TRUE(j.consumer->on_acquire(0, key, kForever));
  ++key;
  j.write_frame(k, 0, key, kSize);
  EXPECT_FALSE(stuck(j.pstream(), k));
}

// The same hold while the producer's write is still in progress (begun, not committed: a copy
// from pageable memory blocks publish() until the stream reaches it, behind the hold): reap()
// must find it from the write in progress, since no committed frame is behind.
TEST_P(CudaBackend, AHoldOnAWriteInProgressIsReleased) {
  CUDAIPC_REQUIRE_GPU();
  Kernels k;
  Joined j(with_mode(GetParam()), {}, 1, kSize);
  j.write_frame(k, 0, 1, kSize);
  ASSERT_TRUE(j.consumer->on_acquire(0, 1, kForever));
  j.producer->begin_write(0);  // waits for the reader; frame 2 is not committed
  k.fill(j.pstream(), j.slots->address(0), kSize, 2);
  EXPECT_TRUE(stuck(j.pstream(), k));
  constexpr std::uint64_t kLimit = 5'000'000'000;
  std::vector<std::uint32_t> stalled;
  j.producer->reap(monotonic_ns(), kLimit, stalled);
  EXPECT_TRUE(stalled.empty());
  j.producer->reap(monotonic_ns() + kLimit + 1'000'000'000, kLimit, stalled);
  ASSERT_EQ(stalled, std::vector<std::uint32_t>{0});
  EXPECT_FALSE(stuck(j.pstream(), k)) << "the producer's stream stayed stuck";
  j.producer->end_write(0, 2);
  EXPECT_EQ(testing::check_pattern(read_back(k, j.slots->address(0), kSize).data(), kSize, 2),
            kSize);
}

// The producer announced a frame and died before its stream wrote it: the consumer's stream waits
// for `ready` until producer_gone() stores it.
TEST_P(CudaBackend, AWaitOnAProducerThatDiedIsReleased) {
  CUDAIPC_REQUIRE_GPU();
  Kernels k;
  Joined j(with_mode(GetParam()), {}, 2, kSize);
  ASSERT_TRUE(j.consumer->on_acquire(1, 5, kForever));  // frame 5 is never written
  k.verify(j.cstream(), j.imported->address(1), kSize, 5);
  EXPECT_TRUE(stuck(j.cstream(), k)) << "the consumer's read did not wait for the frame";
  j.consumer->producer_gone();
  EXPECT_FALSE(stuck(j.cstream(), k)) << "the consumer's stream stayed stuck";
  j.consumer->on_release(1, 5);
}

// cpu_wait gives up at the caller's deadline when the frame is not written by then.
TEST_P(CudaBackend, CpuWaitKeepsToTheDeadline) {
  CUDAIPC_REQUIRE_GPU();
  CudaOptions c;
  c.cpu_wait = true;
  Joined j(with_mode(GetParam()), c, 2, kSize);
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t deadline = monotonic_ns() + 50'000'000;
  EXPECT_FALSE(j.consumer->on_acquire(0, 3, deadline));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(45));
  EXPECT_LT(took, std::chrono::seconds(2));
  j.consumer->on_release(0, 3);
}

TEST_P(CudaBackend, CallersContextAndStreamAreUsedAndLeftAlive) {
  CUDAIPC_REQUIRE_GPU();
  Kernels k;
  cuda::Stream mine = cuda::make_stream(k.context());
  CudaOptions o = with_mode(GetParam());
  o.context = k.context()->get();
  o.stream = mine.get();
  {
    Joined j(o, o, 2, kSize);
    EXPECT_EQ(j.producer->stream(), mine.get());
    EXPECT_EQ(j.consumer->stream(), mine.get());
    for (std::uint64_t key = 1; key <= 10; ++key) {
      const auto i = static_cast<std::uint32_t>(key % 2);
      j.producer->begin_write(i);
      k.fill(mine.get(), j.slots->address(i), kSize, key);
      j.producer->end_write(i, key);
      ASSERT_TRUE(j.consumer->on_acquire(i, key, kForever));
      k.verify(mine.get(), j.imported->address(i), kSize, key);
      j.consumer->on_release(i, key);
    }
    EXPECT_EQ(k.counters(mine.get()).bad, 0u);
  }
  cuda::ScopedContext current(k.context()->get());
  EXPECT_EQ(cuda::driver().cuStreamSynchronize(mine.get()), CUDA_SUCCESS)
      << "the backend destroyed a stream it did not create";
}

// A slot set let go last on some thread (a model's, replying to a pipeline's last request) is
// unmapped on the retiring thread, not there: with that thread held up, the import is still mapped
// once the last reference is gone, and unmapped when the thread runs. In a caller's context and
// stream it goes at once, since the caller may destroy them next (docs/design.md).
TEST_P(CudaBackend, ASetLetGoLastIsUnmappedOnTheRetiringThreadInItsOwnContextOnly) {
  CUDAIPC_REQUIRE_GPU();
  if (GetParam() != CudaExportMode::vmm)
    GTEST_SKIP() << "a legacy import in the exporting process is the producer's own allocation, "
                    "never unmapped by the consumer";
  Kernels k;
  auto mapped = [&](CUdeviceptr p) {
    cuda::ScopedContext current(k.context()->get());
    CUdeviceptr base = 0;
    std::size_t size = 0;
    return cuda::driver().cuMemGetAddressRange(&base, &size, p) == CUDA_SUCCESS;
  };
  enum class Lent { nothing, context, stream, both };
  for (const Lent lent : {Lent::nothing, Lent::context, Lent::stream, Lent::both}) {
    SCOPED_TRACE(lent == Lent::nothing   ? "its own context and stream"
                 : lent == Lent::context ? "the caller's context"
                 : lent == Lent::stream  ? "the caller's stream"
                                         : "the caller's context and stream");
    cuda::Stream mine = cuda::make_stream(k.context());
    CudaOptions o = with_mode(GetParam());
    if (lent == Lent::context || lent == Lent::both) o.context = k.context()->get();
    if (lent == Lent::stream || lent == Lent::both) o.stream = mine.get();
    Joined j(o, o, 2, kSize);
    j.write_frame(k, 0, 1, kSize);
    ASSERT_TRUE(j.consumer->on_acquire(0, 1, kForever));
    k.verify(j.cstream(), j.imported->address(0), kSize, 1);
    j.consumer->on_release(0, 1);
    const CUdeviceptr at = j.imported->address(0);
    ASSERT_TRUE(mapped(at));
    std::promise<void> go;
    std::shared_future<void> hold = go.get_future().share();
    detail::retire([hold]() noexcept { hold.wait_for(std::chrono::seconds(30)); });
    std::thread([&j] { j.imported.reset(); }).join();
    if (lent != Lent::nothing)
      EXPECT_FALSE(mapped(at)) << "a set in what the caller lent outlived its last reference";
    else
      EXPECT_TRUE(mapped(at)) << "the thread that let go last unmapped the set itself";
    go.set_value();
    detail::settle_retired();
    EXPECT_FALSE(mapped(at)) << "never unmapped";
    EXPECT_EQ(k.counters(j.cstream()).bad, 0u);
  }
}

TEST_P(CudaBackend, MalformedInputIsAProtocolErrorNeverACrash) {
  CUDAIPC_REQUIRE_GPU();
  Joined j(with_mode(GetParam()), {}, 4, kSize);
  const bool vmm = j.slots->export_slots().fds.size() == 1;
  auto fresh = [] { return make_cuda_consumer_memory({}, 4); };

  // Producer sync description: magic, version, UUID (16), count.
  const WireBlob psync = j.producer->export_sync();
  EXPECT_EQ(error_of([&] { fresh()->import_sync({}); }), Errc::protocol);
  EXPECT_EQ(error_of([&] { fresh()->import_sync(patched<std::uint32_t>(psync, 0, 1)); }),
            Errc::protocol);
  EXPECT_EQ(error_of([&] { fresh()->import_sync(patched<std::uint32_t>(psync, 4, 1)); }),
            Errc::version_mismatch);
  EXPECT_EQ(error_of([&] { fresh()->import_sync(patched<std::uint32_t>(psync, 24, 5)); }),
            Errc::protocol);
  WireBlob cut = copy(psync);
  cut.bytes.resize(cut.bytes.size() - 1);
  EXPECT_EQ(error_of([&] { fresh()->import_sync(cut); }), Errc::protocol);
  WireBlob with_fd = copy(psync);
  with_fd.fds.push_back(dup_fd(0));
  EXPECT_EQ(error_of([&] { fresh()->import_sync(with_fd); }), Errc::protocol);
  WireBlob unknown_gpu = patched<std::uint64_t>(psync, 8, 0x0123456789abcdefull);
  EXPECT_EQ(error_of([&] { fresh()->import_sync(unknown_gpu); }), Errc::unsupported);

  // Consumer sync description: magic, version, count.
  const WireBlob csync = j.consumer->export_sync();
  SharedPage other;
  auto attach = [&](const WireBlob& b) {
    return error_of([&] {
      j.producer->attach_consumer(7, b, other.producer_page(), 4096, other.producer_side);
    });
  };
  EXPECT_EQ(attach({}), Errc::protocol);
  EXPECT_EQ(attach(copy(psync)), Errc::protocol);
  EXPECT_EQ(attach(patched<std::uint32_t>(csync, 8, 3)), Errc::protocol);
  WireBlob ccut = copy(csync);
  ccut.bytes.resize(ccut.bytes.size() - 1);
  EXPECT_EQ(attach(ccut), Errc::protocol);
  WireBlob clonger = copy(csync);
  clonger.bytes.push_back(0);
  EXPECT_EQ(attach(clonger), Errc::protocol);
  EXPECT_EQ(attach(patched<std::uint32_t>(csync, 12, 7)), Errc::protocol);  // where the words are
  if (csync.fds.size() == 1) {
    // The words in a page of their own: without its fd, with one too many, or with device memory
    // (the slots') in its place, which the CPU could not read.
    WireBlob no_fd = copy(csync);
    no_fd.fds.clear();
    EXPECT_EQ(attach(no_fd), Errc::protocol);
    WireBlob two_fds = copy(csync);
    two_fds.fds.push_back(dup_fd(csync.fds[0].get()));
    EXPECT_EQ(attach(two_fds), Errc::protocol);
    EXPECT_EQ(attach(patched<std::uint32_t>(csync, 12, 0)), Errc::protocol);  // and an fd
    WireBlob not_cuda = copy(csync);  // a plain memfd for the page
    not_cuda.fds.clear();
    not_cuda.fds.push_back(make_memfd("cudaipc-test-not-cuda", 4 << 20));
    EXPECT_EQ(attach(not_cuda), Errc::protocol);
    if (vmm) {
      WireBlob device = copy(csync);
      device.fds.clear();
      device.fds.push_back(dup_fd(j.slots->export_slots().fds[0].get()));
      EXPECT_EQ(attach(device), Errc::protocol);
    }
  }
  EXPECT_EQ(error_of([&] { j.producer->attach_consumer(7, copy(csync), nullptr, 0, nullptr); }),
            Errc::invalid_argument);

  // Slots: magic, version, mode, count, UUID (16), slot_size, stride, allocation size, [handle].
  const WireBlob slots = j.slots->export_slots();
  auto import = [&](const WireBlob& b) {
    return error_of([&] { j.consumer->import_slots(4, kSize, b); });
  };
  EXPECT_EQ(import({}), Errc::protocol);
  EXPECT_EQ(import(patched<std::uint32_t>(slots, 0, 7)), Errc::protocol);
  EXPECT_EQ(import(patched<std::uint32_t>(slots, 8, 7)), Errc::protocol);            // mode
  EXPECT_EQ(import(patched<std::uint32_t>(slots, 8, vmm ? 2 : 1)), Errc::protocol);  // fds
  EXPECT_EQ(import(patched<std::uint32_t>(slots, 12, 3)), Errc::protocol);           // count
  EXPECT_EQ(import(patched<std::uint64_t>(slots, 32, kSize + 1)), Errc::protocol);   // slot size
  EXPECT_EQ(import(patched<std::uint64_t>(slots, 40, 4096)), Errc::protocol);        // stride
  EXPECT_EQ(import(patched<std::uint64_t>(slots, 40, (2u << 20) + 1)), Errc::protocol);
  EXPECT_EQ(import(patched<std::uint64_t>(slots, 40, ~0ull - 4095)), Errc::protocol);
  EXPECT_EQ(import(patched<std::uint64_t>(slots, 48, kSize)), Errc::protocol);  // allocation
  EXPECT_EQ(import(patched<std::uint64_t>(slots, 48, ~0ull)), Errc::protocol);
  EXPECT_EQ(error_of([&] { j.consumer->import_slots(5, kSize, copy(slots)); }), Errc::protocol);
  WireBlob longer = copy(slots);
  longer.bytes.push_back(0);
  EXPECT_EQ(import(longer), Errc::protocol);
  WireBlob other_fds = copy(slots);
  if (vmm)
    other_fds.fds.clear();
  else
    other_fds.fds.push_back(dup_fd(0));
  EXPECT_EQ(import(other_fds), Errc::protocol);

  // Well-formed but not what it claims: a memfd where the VMM fd should be, or a made-up legacy
  // handle. The driver refuses them; the refusal must surface as an Error.
  WireBlob forged = copy(slots);
  if (vmm) {
    forged.fds.clear();
    forged.fds.emplace_back(::memfd_create("not-gpu-memory", MFD_CLOEXEC));
  } else {
    for (std::size_t b = 56; b < forged.bytes.size(); ++b) forged.bytes[b] ^= 0x5a;
  }
  EXPECT_NE(import(forged), Errc::ok);

  // After all that, the real thing still imports and works.
  EXPECT_EQ(import(slots), Errc::ok);
}

TEST(CudaBackendDevices, ConsumerOnAnotherGpuUsesPeerAccessOrSaysWhyNot) {
  CUDAIPC_REQUIRE_GPU();
  int n = 0;
  cuda::check(cuda::driver().cuDeviceGetCount(&n), "cuDeviceGetCount");
  if (n < 2) GTEST_SKIP() << "needs two GPUs, this machine has " << n;
  int can = 0;
  cuda::check(cuda::driver().cuDeviceCanAccessPeer(&can, 1, 0), "cuDeviceCanAccessPeer");
  for (CudaExportMode m : {CudaExportMode::vmm, CudaExportMode::legacy}) {
    CudaOptions p = with_mode(m), c;
    p.device = 0;
    c.device = 1;
    if (!can) {
      auto prod = make_cuda_producer_memory(p, 2);
      auto cons = make_cuda_consumer_memory(c, 2);
      EXPECT_EQ(error_of([&] { cons->import_sync(prod->export_sync()); }), Errc::unsupported);
      continue;
    }
    Kernels k0(0), k1(1);
    Joined j(p, c, 2, kSize);
    for (std::uint64_t key = 1; key <= 10; ++key) {
      const auto i = static_cast<std::uint32_t>(key % 2);
      j.producer->begin_write(i);
      k0.fill(j.pstream(), j.slots->address(i), kSize, key);
      j.producer->end_write(i, key);
      ASSERT_TRUE(j.consumer->on_acquire(i, key, kForever));
      k1.verify(j.cstream(), j.imported->address(i), kSize, key);
      j.consumer->on_release(i, key);
    }
    EXPECT_EQ(k1.counters(j.cstream()).bad, 0u) << mode_name(m);
  }
}

// Not a check: what each per-frame driver call costs on the CPU here, printed, so a per-frame cost
// in the CUDA path can be pinned on a call (IPC events against plain ones, queries, context
// switches). Idle stream and completed events: the paced case.
TEST(CudaCallCosts, PrintPerCallCpuCost) {
  CUDAIPC_REQUIRE_GPU();
  Kernels k;
  const cuda::Driver& d = cuda::driver();
  cuda::ScopedContext current(k.context()->get());
  cuda::Event ipc = cuda::make_ipc_event(k.context());
  CUevent plain_raw = nullptr;
  cuda::check(d.cuEventCreate(&plain_raw, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  cuda::Event plain(k.context(), plain_raw);
  const CUstream s = k.own_stream();
  constexpr int kCalls = 2000;
  auto time = [&](const char* what, auto&& call) {
    call();  // warm
    cuda::check(d.cuStreamSynchronize(s), "cuStreamSynchronize");
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) call();
    const auto ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    cuda::check(d.cuStreamSynchronize(s), "cuStreamSynchronize");
    std::printf("%-44s %8.2f us/call\n", what, ns / kCalls / 1000.0);
  };
  time("ScopedContext, its context current already",
       [&] { cuda::ScopedContext again(k.context()->get()); });
  time("cuCtxPushCurrent+cuCtxPopCurrent", [&] {
    cuda::check(d.cuCtxPushCurrent(k.context()->get()), "cuCtxPushCurrent");
    CUcontext popped = nullptr;
    cuda::check(d.cuCtxPopCurrent(&popped), "cuCtxPopCurrent");
  });
  time("cuEventRecord (IPC event)", [&] { d.cuEventRecord(ipc.get(), s); });
  time("cuEventRecord (plain event)", [&] { d.cuEventRecord(plain.get(), s); });
  cuda::check(d.cuStreamSynchronize(s), "cuStreamSynchronize");
  time("cuStreamWaitEvent (IPC event, complete)", [&] { d.cuStreamWaitEvent(s, ipc.get(), 0); });
  time("cuStreamWaitEvent (plain event, complete)",
       [&] { d.cuStreamWaitEvent(s, plain.get(), 0); });
  time("cuEventQuery (IPC event, complete)", [&] { d.cuEventQuery(ipc.get()); });
  time("cuEventSynchronize (IPC event, complete)", [&] { d.cuEventSynchronize(ipc.get()); });
  time("cuStreamQuery (idle stream)", [&] { d.cuStreamQuery(s); });
  time("record + wait (IPC event, one frame's pair)", [&] {
    d.cuEventRecord(ipc.get(), s);
    d.cuStreamWaitEvent(s, ipc.get(), 0);
  });
  // The GPU semaphores that replaced the events: a registered host page, as the channel uses.
  SharedPage page;
  cuda::RegisteredPage reg(k.context(), page.producer_side, page.producer_page(), 4096);
  const CUdeviceptr word = reg.device_address(&page.producer_page()->ready);
  time("cuStreamWriteValue32 (host page)", [&] { cuda::stream_write(s, word, 1); });
  time("cuStreamWaitValue32 (host page, reached)", [&] { cuda::stream_wait(s, word, 1); });
  time("write + wait (semaphores, one frame's pair)", [&] {
    cuda::stream_write(s, word, 1);
    cuda::stream_wait(s, word, 1);
  });
}

INSTANTIATE_TEST_SUITE_P(ExportModes, CudaBackend,
                         ::testing::Values(CudaExportMode::vmm, CudaExportMode::legacy),
                         [](const auto& info) { return std::string(mode_name(info.param)); });

}  // namespace
}  // namespace cudaipc
