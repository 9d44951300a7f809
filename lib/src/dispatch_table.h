#pragma once
// The in-memory dispatch table: readers never lock. A lookup is one atomic load of an immutable
// map; an insert (rare: once per problem) copies the map under a writer mutex and publishes the
// copy. Replaced maps are kept until the table dies, so a reader holding an old one stays valid;
// the table's memory grows with inserts, which are bounded by the number of distinct problems.

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace kvtune::detail {

template <class Key, class Value, class Hash>
class DispatchTable {
 public:
  using Map = std::unordered_map<Key, std::shared_ptr<const Value>, Hash>;

  DispatchTable() : current_(new Map()) { retired_.emplace_back(current_.load()); }

  /// Lock-free lookup; nullptr when absent. The pointer stays valid for the table's lifetime.
  const Value* find(const Key& key) const {
    const Map* map = current_.load(std::memory_order_acquire);
    const auto it = map->find(key);
    return it == map->end() ? nullptr : it->second.get();
  }

  /// Inserts or replaces.
  void insert(const Key& key, std::shared_ptr<const Value> value) {
    std::lock_guard<std::mutex> lock(writer_);
    auto next = std::make_unique<Map>(*current_.load(std::memory_order_relaxed));
    (*next)[key] = std::move(value);
    current_.store(next.get(), std::memory_order_release);
    retired_.push_back(std::move(next));
  }

  std::size_t size() const { return current_.load(std::memory_order_acquire)->size(); }

 private:
  std::atomic<const Map*> current_;
  std::mutex writer_;
  std::vector<std::unique_ptr<const Map>> retired_;  // every map ever published, current included
};

}  // namespace kvtune::detail
