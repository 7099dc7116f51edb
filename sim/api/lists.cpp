#include <cctype>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "common/text.hpp"
#include "sim/api/api.hpp"
#include "workloads/multimodal.hpp"

namespace servesim::api {

std::vector<std::string> option_list(std::string_view value, std::string_view option) { return text::option_list(value, option); }

std::vector<double> mtp_acceptance_list(const std::string& value) {
  std::vector<double> out;
  for (const auto& s : option_list(value.empty() ? "0.7" : value, "--mtp-acceptance")) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (!end || *end || s.empty()) throw Error("--mtp-acceptance", "", "'" + s + "' is not a number");
    out.push_back(v);
  }
  return out;
}

workloads::MultimodalConfig images_option(const std::string& value) {
  return workloads::parse_images_flag(value);   // empty items refused there (text::option_list)
}

}  // namespace servesim::api
