// The gaps between a request's streamed tokens, over every request of a run: the stalls a reader
// of the stream sees. aiperf's ITL is a per-request mean ((latency - TTFT) / (OSL - 1)), which
// hides a 100 ms pause of a prompt's prefill chunk among a thousand 20 ms decode steps; the
// distribution of the gaps themselves does not.
//
// A gap is the time between two consecutive steps that gave a request tokens, at the engine's
// output (the step's end), from the request's second visible token on: the first-to-second gap
// is TTST, reported beside it (on a disaggregated deployment it is the KV handoff). A step that
// gives a request several tokens (speculative decoding) is one gap, as one streamed chunk.
//
// Kept as a histogram of logarithmic bins, 1,024 an octave (each under 0.1 % wide), from 2^-20 s
// (about 1 us) to 2^14 s (4.5 hours): 34,816 bins (272 KB, allocated at the first gap), so a run's
// memory does not grow with its tokens and a gap costs a compare and an add (equal consecutive gaps,
// a decode step's batch, are counted as one run; a run's bin is read off the bits of its double).
// Percentiles are numpy's "linear" ones over the gaps, each gap read as its bin's middle: within
// 0.05 % of the exact figure; count, mean, min and max are exact. The measured requests' gaps are
// counted, not the warm-up's, as the other metrics count them.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace servesim::sim {

struct Stats;

class TokenGaps {
 public:
  // `count` gaps of `gap_s` seconds.
  void add(double gap_s, std::int64_t count = 1) {
    if (count <= 0 || !(gap_s >= 0)) return;
    if (gap_s == run_gap_) {
      run_count_ += count;
      return;
    }
    flush();
    run_gap_ = gap_s;
    run_count_ = count;
  }
  // Exact count, mean, min, max; percentiles as above (ms). count 0: every field NaN but count.
  Stats stats_ms() const;

  static constexpr double kMinS = 0x1p-20, kMaxS = 0x1p14;
  static int bin_of(double gap_s);
  static double bin_value_s(int bin);   // the bin's geometric middle

 private:
  void flush() const;
  mutable std::vector<std::int64_t> bins_;
  mutable double sum_s_ = 0, sumsq_s_ = 0, min_s_ = INFINITY, max_s_ = 0;
  mutable std::int64_t total_ = 0;
  mutable double run_gap_ = NAN;      // the open run of equal gaps (NaN: none)
  mutable std::int64_t run_count_ = 0;
};

}  // namespace servesim::sim
