// A growable ring buffer deque of small values: O(1) push/pop at both ends and no allocation
// once it has grown to the queue's high-water mark (std::deque allocates chunk by chunk).
#pragma once
#include <cstddef>
#include <vector>

namespace servesim::sim {

template <class T>
class Ring {
 public:
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  T& front() { return buf_[head_]; }
  const T& front() const { return buf_[head_]; }
  const T& operator[](std::size_t i) const { return buf_[(head_ + i) & mask()]; }
  void push_back(T v) {
    grow_if_full();
    buf_[(head_ + size_) & mask()] = v;
    ++size_;
  }
  void push_front(T v) {
    grow_if_full();
    head_ = (head_ + buf_.size() - 1) & mask();
    buf_[head_] = v;
    ++size_;
  }
  void pop_front() {
    head_ = (head_ + 1) & mask();
    --size_;
  }

 private:
  std::size_t mask() const { return buf_.size() - 1; }
  void grow_if_full() {
    if (size_ < buf_.size()) return;
    std::vector<T> bigger(buf_.empty() ? 16 : buf_.size() * 2);
    for (std::size_t i = 0; i < size_; ++i) bigger[i] = buf_[(head_ + i) & mask()];
    buf_.swap(bigger);
    head_ = 0;
  }
  std::vector<T> buf_;
  std::size_t head_ = 0, size_ = 0;
};

}  // namespace servesim::sim
