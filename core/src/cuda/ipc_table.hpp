// Process-wide tables of objects shared by legacy IPC handle (memory and events), with counted
// references. The driver lets a process open a given memory handle once per device, and never
// open a handle it exported itself (cuIpcOpen* fail with CUDA_ERROR_INVALID_CONTEXT). Two
// consumers in one process, or a producer and a consumer in one process, therefore share one
// object per handle: the table holds this process's own exports and its imports, and the object
// is freed when its last reference goes.
#pragma once

#include <cuda.h>

#include <array>
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

namespace cudaipc::cuda {

using IpcKey = std::array<unsigned char, CU_IPC_HANDLE_SIZE>;

template <typename Handle>
IpcKey ipc_key(const Handle& h) {
  static_assert(sizeof(Handle) == CU_IPC_HANDLE_SIZE, "IPC handles are 64 bytes");
  IpcKey k;
  std::memcpy(k.data(), &h, k.size());
  return k;
}

template <typename T>
class IpcTable {
  struct Entry {
    T value;
    std::size_t refs;
  };
  using Map = std::map<IpcKey, std::shared_ptr<Entry>>;

 public:
  // A counted reference to one entry; the entry's value dies with the last one.
  class Ref {
   public:
    Ref() = default;
    Ref(Ref&& o) noexcept
        : table_(std::exchange(o.table_, nullptr)), key_(o.key_), entry_(std::move(o.entry_)) {}
    Ref& operator=(Ref&& o) noexcept {
      if (this != &o) {
        reset();
        table_ = std::exchange(o.table_, nullptr);
        key_ = o.key_;
        entry_ = std::move(o.entry_);
      }
      return *this;
    }
    Ref(const Ref&) = delete;
    Ref& operator=(const Ref&) = delete;
    ~Ref() { reset(); }

    const T& operator*() const noexcept { return entry_->value; }
    const T* operator->() const noexcept { return &entry_->value; }
    explicit operator bool() const noexcept { return table_ != nullptr; }

    void reset() noexcept {
      if (table_) table_->release(key_, entry_);
      table_ = nullptr;
    }

   private:
    friend class IpcTable;
    Ref(IpcTable* table, const IpcKey& key, std::shared_ptr<Entry> entry) noexcept
        : table_(table), key_(key), entry_(std::move(entry)) {}
    IpcTable* table_ = nullptr;
    IpcKey key_{};
    std::shared_ptr<Entry> entry_;
  };

  // Records an object this process exported under `key`. Should the driver hand out the bytes of
  // a handle that an older, still referenced entry was found by, the new export takes the key:
  // the older entry lives on for its holders but is found no more.
  Ref add(const IpcKey& key, T value) {
    auto entry = std::make_shared<Entry>(Entry{std::move(value), 1});
    std::lock_guard<std::mutex> lock(mu_);
    entries_[key] = entry;
    return Ref(this, key, std::move(entry));
  }

  // The object for `key`: this process's own export or an earlier import, else what open()
  // returns. open() runs under the table lock, so two importers never both open one handle.
  template <typename Open>
  Ref get_or_open(const IpcKey& key, Open&& open) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it == entries_.end())
      it = entries_.emplace(key, std::make_shared<Entry>(Entry{open(), 0})).first;
    ++it->second->refs;
    return Ref(this, key, it->second);
  }

  // Never destroyed: objects with static storage may drop references while the process exits.
  static IpcTable& instance() {
    static IpcTable* const table = std::make_unique<IpcTable>().release();
    return *table;
  }

 private:
  // The value is destroyed (handle closed, memory freed) under the lock, so a later get_or_open
  // of the same key cannot run before the driver has let go of it.
  void release(const IpcKey& key, std::shared_ptr<Entry>& entry) noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    if (--entry->refs != 0) {
      entry.reset();
      return;
    }
    auto it = entries_.find(key);
    if (it != entries_.end() && it->second == entry) entries_.erase(it);
    entry.reset();
  }

  std::mutex mu_;
  Map entries_;
};

}  // namespace cudaipc::cuda
