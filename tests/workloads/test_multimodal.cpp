// Vision token counts checked by hand against InternVL's dynamic_preprocess.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "workloads/multimodal.hpp"
#include "workloads/workload.hpp"

using namespace servesim::workloads;

TEST(Tiling, SquareImages) {
  // 512x512: grid 1x1 is exact; 2x2 ties in aspect but 512^2 is not > 0.5*512^2*4 => 1 tile, no thumbnail.
  auto t = tile_image(512, 512);
  EXPECT_EQ(t.tiles, 1);
  EXPECT_FALSE(t.thumbnail);
  EXPECT_EQ(t.tokens, 256);
  // 1024x1024: 2x2 ties with 1x1 and 1024^2 > 0.5*512^2*4 => 2x2; 3x3 needs > 0.5*512^2*9 (no).
  t = tile_image(1024, 1024);
  EXPECT_EQ(t.grid_cols, 2);
  EXPECT_EQ(t.grid_rows, 2);
  EXPECT_TRUE(t.thumbnail);
  EXPECT_EQ(t.tiles, 5);
  EXPECT_EQ(t.tokens, 5 * 256);
  // 4096x4096: 3x3 wins the tie (area > 0.5*512^2*9) => 9 + thumbnail.
  EXPECT_EQ(tile_image(4096, 4096).tiles, 10);
}

TEST(Tiling, WideImages) {
  // 1920x1080 (aspect 1.78): closest grids are 2x1 and 4x2 (both 2.0, diff 0.22; 3x2 is 0.28);
  // 4x2 wins the tie since 1920*1080 > 0.5*512^2*8 => 8 tiles + thumbnail = 2304 tokens.
  auto t = tile_image(1920, 1080);
  EXPECT_EQ(t.grid_cols, 4);
  EXPECT_EQ(t.grid_rows, 2);
  EXPECT_EQ(t.tiles, 9);
  EXPECT_EQ(t.tokens, 2304);
  // A small 2:1 image still gets the 2x1 grid (exact aspect) but not 4x2 (too small) => 2 + 1.
  t = tile_image(100, 50);
  EXPECT_EQ(t.grid_cols * t.grid_rows, 2);
  EXPECT_EQ(t.tiles, 3);
  // Max 12 tiles + thumbnail = 3,328 tokens at most.
  EXPECT_EQ(tile_image(12 * 512, 512).tokens, 13 * 256);
  EXPECT_EQ(tile_image(100000, 10).tiles, 13);
  TilingConfig no_thumb;
  no_thumb.use_thumbnail = false;
  EXPECT_EQ(tile_image(1024, 1024, no_thumb).tiles, 4);
}

TEST(Video, FramesAndPruning) {
  VideoSpec v;
  v.fps = 2;
  v.duration_s = 10;
  auto t = video_tokens(v);
  EXPECT_EQ(t.frames, 20);
  EXPECT_EQ(t.tokens, 20 * 256);
  v.duration_s = 100;   // 200 frames capped at 128
  EXPECT_EQ(video_tokens(v).frames, 128);
  EXPECT_EQ(video_tokens(v).tokens, 128 * 256);
  v.duration_s = 10;
  v.pruning_rate = 0.75;   // floor(5120 * 0.25)
  EXPECT_EQ(video_tokens(v).tokens, 1280);
  EXPECT_EQ(video_tokens(v).frames, 20);   // the encoder still sees every frame
  v.duration_s = 0.2;   // floor(0.4) -> at least one frame
  v.pruning_rate = 0.9;
  EXPECT_EQ(video_tokens(v).frames, 1);
  EXPECT_EQ(video_tokens(v).tokens, 256);   // never below one frame's worth
}

TEST(Vision, PerRequestSum) {
  MultimodalConfig mm;
  mm.images.push_back({1024, 1024, 2});
  mm.images.push_back({512, 512, 1});
  mm.has_video = true;
  mm.video.fps = 1;
  mm.video.duration_s = 3;
  const auto w = vision_work(mm);
  EXPECT_EQ(w.tiles, 2 * 5 + 1 + 3);
  EXPECT_EQ(w.tokens, (2 * 5 + 1 + 3) * 256);
}

// --image-fraction: the share of requests that carry the images, chosen per request from the
// seed and its index alone.
TEST(ImageFraction, ShareAndDeterminism) {
  using namespace servesim::workloads;
  MultimodalConfig mm;
  mm.images.push_back({1024, 1024, 1});   // 2 x 2 tiles + thumbnail = 5 tiles, 1280 tokens
  mm.fraction = 0.3;
  WorkloadConfig c;
  c.arrival = Arrival::concurrency;
  c.concurrency = 8;
  c.requests = 10000;
  c.isl = LengthDist::fixed_at(6000);
  c.osl = LengthDist::fixed_at(600);
  c.multimodal = mm;
  c.seed = 7;
  auto count = [](WorkloadConfig w) {
    auto wl = make_workload(w);
    std::vector<bool> carried;
    double isl = 0;
    while (auto r = wl->next()) {
      carried.push_back(r->vision_tokens > 0);
      isl += double(r->input_tokens);
      if (r->vision_tokens > 0) {
        EXPECT_EQ(r->vision_tokens, 1280);
        EXPECT_EQ(r->vision_tiles, 5);
      }
    }
    return std::make_pair(carried, isl / double(carried.size()));
  };
  const auto [a, mean_isl] = count(c);
  const double share = double(std::count(a.begin(), a.end(), true)) / double(a.size());
  // Binomial: sd = sqrt(0.3 x 0.7 / 10000) = 0.0046; 4 sd either side.
  EXPECT_NEAR(share, 0.3, 4 * 0.0046);
  // Mean prompt = 6000 + share x 1280 vision tokens.
  EXPECT_NEAR(mean_isl, 6000 + share * 1280, 1e-6);
  // The same requests carry the images open loop at any rate (index and seed alone).
  WorkloadConfig o = c;
  o.arrival = Arrival::poisson;
  o.rate_per_s = 40;
  EXPECT_EQ(count(o).first, a);
  // Another seed, other requests; fraction 1 and 0: all and none.
  c.seed = 8;
  EXPECT_NE(count(c).first, a);
  c.multimodal.fraction = 1;
  const auto all = count(c).first;
  EXPECT_EQ(std::count(all.begin(), all.end(), true), 10000);
  c.multimodal.fraction = 0;
  const auto none = count(c).first;
  EXPECT_EQ(std::count(none.begin(), none.end(), true), 0);
}

TEST(ImageFraction, BadValuesAreOneLine) {
  using namespace servesim::workloads;
  EXPECT_THROW(check_fraction(1.5), servesim::Error);
  EXPECT_THROW(check_fraction(-0.1), servesim::Error);
  EXPECT_THROW(check_fraction(std::nan("")), servesim::Error);
  EXPECT_THROW(parse_images_flag("1024"), servesim::Error);
  EXPECT_EQ(parse_images_flag("1024x768:2").images.at(0).count, 2);
  // An empty item was dropped ("1024x768,,512x512" read as two images): refused, naming it.
  try {
    parse_images_flag("1024x768,,512x512");
    ADD_FAILURE() << "accepted an empty item";
  } catch (const servesim::Error& e) {
    EXPECT_NE(std::string(e.what()).find("item 2 of '1024x768,,512x512' is empty"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse_images_flag("1024x768, 512x512").images.size(), 2u);
}
