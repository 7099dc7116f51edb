// Vision token counts checked by hand against InternVL's dynamic_preprocess.
#include <gtest/gtest.h>

#include "workloads/multimodal.hpp"

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
