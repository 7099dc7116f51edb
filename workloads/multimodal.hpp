// Images and video frames -> encoder tiles -> vision tokens, for Nemotron Nano VL-style models
// (RADIO ViT-H/16 at 512x512 tiles, pixel-shuffle 0.5: 256 tokens per tile).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace servesim::workloads {

struct ImageTiling {
  int tiles = 0;            // encoder tiles incl. the thumbnail
  int grid_cols = 1, grid_rows = 1;
  bool thumbnail = false;
  std::int64_t tokens = 0;  // tiles * tokens_per_tile
};

struct TilingConfig {
  int tile_px = 512;          // RADIO force_image_size
  int min_tiles = 1;
  int max_tiles = 12;         // vLLM nano_nemotron_vl DEFAULT_NUM_TILES
  bool use_thumbnail = true;  // one extra global tile when the grid has more than one tile
  int tokens_per_tile = 256;  // (512/16)^2 * 0.5^2
};

// InternVL dynamic_preprocess: pick the grid (cols x rows, min..max tiles) whose aspect ratio is
// closest to the image's, preferring the larger grid on ties when the image is big enough.
ImageTiling tile_image(int width_px, int height_px, const TilingConfig& cfg = {});

struct VideoSpec {
  double fps = 2;             // sampling rate of frames fed to the encoder
  double duration_s = 0;
  int max_frames = 128;
  double pruning_rate = 0;    // Efficient Video Sampling: fraction of video tokens dropped
};
struct VideoTokens { int frames = 0; std::int64_t tokens = 0; };
// One tile per frame; frames = min(max_frames, max(1, floor(fps * duration))).
VideoTokens video_tokens(const VideoSpec& v, const TilingConfig& cfg = {});

struct ImageSpec { int width_px = 0, height_px = 0, count = 1; };
struct MultimodalConfig {
  std::vector<ImageSpec> images;   // every request that carries media carries all of these
  bool has_video = false;
  // The share of requests that carry the images / video (the rest are text only), decided per
  // request from the seed and its index alone (media_carried): the same requests at any rate,
  // concurrency or thread count.
  double fraction = 1;
  VideoSpec video;
  TilingConfig tiling;
  bool empty() const { return images.empty() && !has_video; }
};
struct VisionWork { int tiles = 0; std::int64_t tokens = 0; };
VisionWork vision_work(const MultimodalConfig& mm);   // per request that carries the media
// The --images flag: "WIDTHxHEIGHT[:COUNT],..." (every image on each request that carries media);
// throws Error naming `flag`. --image-fraction F sets `fraction` (checked by check_fraction).
MultimodalConfig parse_images_flag(const std::string& csv, const std::string& flag = "--images");
void check_fraction(double fraction, const std::string& flag = "--image-fraction");
// Whether request `index` of a workload seeded `seed` carries the media (always when fraction >= 1).
bool media_carried(const MultimodalConfig& mm, std::uint64_t seed, std::int64_t index);

}  // namespace servesim::workloads
