// A step-cost model of 10 ms of GPU per step whatever the step holds, so that step boundaries in
// engine tests can be followed by hand.
#pragma once

#include <string>

#include "models/step_cost.hpp"

namespace servesim::sim::testing {

class FlatCost : public models::StepCostModel {
 public:
  double seconds(const models::StepBatch&) const override { return 0.010; }
  double encoder_seconds(int) const override { return 0; }
  models::StepTime breakdown(const models::StepBatch& b) const override { return {seconds(b), {}}; }
  std::string provenance() const override { return "flat test cost"; }
};

}  // namespace servesim::sim::testing
