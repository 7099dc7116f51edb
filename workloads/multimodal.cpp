// Vision token counts for Nemotron Nano VL-style models. Facts (see the project's models
// reference, section 4.5 "Vision encoder"):
//  - RADIO v2.5-H ViT-H/16 at 512x512 tiles; tokens per tile = (512/16)^2 * 0.5^2 = 256 after the
//    0.5 pixel shuffle (vLLM BaseNanoNemotronVLProcessor: num_image_token).
//  - Images: InternVL-style dynamic aspect-ratio tiling, default max 12 tiles, plus one thumbnail
//    tile when the grid has more than one tile (vLLM nano_nemotron_vl DEFAULT_NUM_TILES = 12,
//    use_thumbnail) => at most 13 * 256 = 3,328 tokens per image.
//  - Video: one 512x512 tile per frame (vLLM PR #26403), 256 tokens per frame before Efficient
//    Video Sampling prunes a fraction (--video-pruning-rate); recipes sample 2 fps, <= 128 frames.
// Special tokens around images/frames (a few per item) are not counted.
#include "workloads/multimodal.hpp"

#include "common/splitmix.hpp"
#include <cstdlib>
#include "common/text.hpp"
#include "common/error.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace servesim::workloads {

ImageTiling tile_image(int width_px, int height_px, const TilingConfig& cfg) {
  ImageTiling t;
  if (width_px <= 0 || height_px <= 0) return t;
  // InternVL dynamic_preprocess / find_closest_aspect_ratio. Candidate grids (i cols, j rows) with
  // min <= i*j <= max, visited by increasing tile count; a strictly closer aspect ratio wins, and on
  // a tie the later (larger) grid wins when the image area exceeds half the grid's pixel area.
  const double aspect = static_cast<double>(width_px) / height_px;
  const double area = static_cast<double>(width_px) * height_px;
  const double tile_area = static_cast<double>(cfg.tile_px) * cfg.tile_px;
  double best_diff = std::numeric_limits<double>::infinity();
  int best_i = 1, best_j = 1;
  for (int n = std::max(1, cfg.min_tiles); n <= cfg.max_tiles; ++n) {
    for (int i = 1; i <= n; ++i) {
      if (n % i != 0) continue;
      const int j = n / i;
      const double diff = std::fabs(aspect - static_cast<double>(i) / j);
      if (diff < best_diff) {
        best_diff = diff;
        best_i = i;
        best_j = j;
      } else if (diff == best_diff && area > 0.5 * tile_area * i * j) {
        best_i = i;
        best_j = j;
      }
    }
  }
  t.grid_cols = best_i;
  t.grid_rows = best_j;
  const int blocks = best_i * best_j;
  t.thumbnail = cfg.use_thumbnail && blocks != 1;
  t.tiles = blocks + (t.thumbnail ? 1 : 0);
  t.tokens = static_cast<std::int64_t>(t.tiles) * cfg.tokens_per_tile;
  return t;
}

VideoTokens video_tokens(const VideoSpec& v, const TilingConfig& cfg) {
  VideoTokens out;
  if (v.duration_s <= 0 || v.fps <= 0) return out;
  const double sampled = std::floor(v.fps * v.duration_s);
  out.frames = static_cast<int>(std::clamp(sampled, 1.0, static_cast<double>(std::max(1, v.max_frames))));
  const std::int64_t full = static_cast<std::int64_t>(out.frames) * cfg.tokens_per_tile;
  // EVS keeps floor(total * (1 - rate)) tokens but never fewer than one frame's worth (vLLM
  // multimodal/evs.py compute_retained_tokens_count).
  const auto kept = static_cast<std::int64_t>(std::floor(static_cast<double>(full) * (1.0 - v.pruning_rate)));
  out.tokens = v.pruning_rate > 0 ? std::max<std::int64_t>(cfg.tokens_per_tile, kept) : full;
  return out;
}

VisionWork vision_work(const MultimodalConfig& mm) {
  VisionWork w;
  for (const auto& img : mm.images) {
    const ImageTiling t = tile_image(img.width_px, img.height_px, mm.tiling);
    w.tiles += t.tiles * img.count;
    w.tokens += t.tokens * img.count;
  }
  if (mm.has_video) {
    const VideoTokens v = video_tokens(mm.video, mm.tiling);
    w.tiles += v.frames;
    w.tokens += v.tokens;
  }
  return w;
}

MultimodalConfig parse_images_flag(const std::string& csv, const std::string& flag) {
  MultimodalConfig mm;
  auto whole = [&](const std::string& v, long lo, long hi) {
    char* end = nullptr;
    const long x = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || !end || *end || x < lo || x > hi)
      throw Error(flag, "", "'" + v + "' is not a whole number in " + std::to_string(lo) + ".." + std::to_string(hi));
    return int(x);
  };
  for (const auto& s : text::option_list(csv, flag)) {
    const auto colon = s.find(':');
    const std::string dims = s.substr(0, colon);
    const auto x = text::lower(dims).find('x');
    if (x == std::string::npos) throw Error(flag, "", "'" + s + "' is not WIDTHxHEIGHT[:COUNT], e.g. 1024x768 or 1024x768:2");
    ImageSpec im;
    im.width_px = whole(dims.substr(0, x), 1, 65536);
    im.height_px = whole(dims.substr(x + 1), 1, 65536);
    im.count = colon == std::string::npos ? 1 : whole(s.substr(colon + 1), 1, 64);
    mm.images.push_back(im);
  }
  return mm;
}

void check_fraction(double fraction, const std::string& flag) {
  if (!(fraction >= 0 && fraction <= 1))
    throw Error(flag, "", "must be the share of requests that carry the images, from 0 to 1 (e.g. 0.3)");
}

bool media_carried(const MultimodalConfig& mm, std::uint64_t seed, std::int64_t index) {
  if (mm.fraction >= 1) return true;
  if (!(mm.fraction > 0)) return false;
  // A uniform draw in [0, 1) from the seed and the request's index alone (53 bits of a splitmix64 hash).
  const std::uint64_t h = splitmix64(splitmix64(seed ^ 0x6d65646961ULL) + static_cast<std::uint64_t>(index));
  return double(h >> 11) * 0x1.0p-53 < mm.fraction;
}

}  // namespace servesim::workloads
