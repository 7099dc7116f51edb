#include <cctype>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "common/text.hpp"
#include "sim/api/api.hpp"
#include "workloads/multimodal.hpp"

namespace servesim::api {

std::vector<std::string> option_list(std::string_view value, std::string_view option) { return text::option_list(value, option); }

workloads::MultimodalConfig images_option(const std::string& value) {
  return workloads::parse_images_flag(value);   // empty items refused there (text::option_list)
}

}  // namespace servesim::api
