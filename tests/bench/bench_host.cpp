// Host-memory backend: slots are memfd mappings the benchmark reads and writes with the CPU.
#include <vector>

#include "bench.hpp"
#include "pattern.hpp"

namespace bench {
namespace {

class HostProducer final : public ProducerSide {
 public:
  explicit HostProducer(const Scenario& s) : s_(s) {
    // copy-in publishes from a private buffer, as a producer that renders elsewhere would.
    if (s.producer_mode == ProducerMode::copy_in) src_.assign(s.bytes, 0);
  }
  cudaipc::PublishStatus produce(cudaipc::Producer& p, std::uint64_t seq) override {
    const bool write = s_.payload == Payload::verify;
    if (s_.producer_mode == ProducerMode::copy_in) {
      if (write) cudaipc::testing::fill_pattern(src_.data(), src_.size(), seq);
      return p.publish(src_.data(), src_.size());
    }
    cudaipc::PublishStatus st;
    cudaipc::WriteSlot slot = p.begin_frame(&st);
    if (!slot) return st;
    if (write) cudaipc::testing::fill_pattern(slot.data(), s_.bytes, seq);
    p.commit(slot);
    return cudaipc::PublishStatus::published;
  }

 private:
  Scenario s_;
  std::vector<std::uint8_t> src_;
};

class HostConsumer final : public ConsumerSide {
 public:
  explicit HostConsumer(const Scenario& s) : s_(s) {}
  bool check(const cudaipc::Frame& f) override {
    if (f.size() != s_.bytes) return false;
    if (s_.payload == Payload::control) return true;
    return cudaipc::testing::check_pattern(f.data(), f.size(), f.seq()) == f.size();
  }

 private:
  Scenario s_;
};

class HostBackend final : public Backend {
 public:
  const char* name() const override { return "host"; }
  bool available(std::string*) const override { return true; }
  void configure(const Scenario&, cudaipc::ProducerOptions& o) const override {
    o.memory = cudaipc::MemoryKind::host;
  }
  void configure(const Scenario&, cudaipc::ConsumerOptions&) const override {}
  std::unique_ptr<ProducerSide> producer_side(const Scenario& s) const override {
    return std::make_unique<HostProducer>(s);
  }
  std::unique_ptr<ConsumerSide> consumer_side(const Scenario& s,
                                              cudaipc::Consumer&) const override {
    return std::make_unique<HostConsumer>(s);
  }
};

const HostBackend host_backend;
const BackendRegistrar registrar(&host_backend);

}  // namespace
}  // namespace bench
