#include <cctype>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "common/text.hpp"
#include "sim/api/api.hpp"
#include "workloads/multimodal.hpp"

namespace servesim::api {

std::vector<std::string> option_list(std::string_view value, std::string_view option) {
  std::vector<std::string> items;
  bool blank = true;
  for (const char c : value) blank &= std::isspace(static_cast<unsigned char>(c)) != 0;
  if (blank) return items;   // no value at all: the caller's default, or its own "is empty"
  std::size_t start = 0, n = 0;
  while (start <= value.size()) {
    std::size_t end = value.find(',', start);
    if (end == std::string_view::npos) end = value.size();
    ++n;
    const std::vector<std::string> item = text::split_csv(value.substr(start, end - start));   // trimmed, or none
    if (item.empty())
      throw Error(std::string(option), "",
                  "item " + std::to_string(n) + " of '" + std::string(value) +
                      "' is empty; give the values separated by single commas, with none before the first or after the last");
    items.push_back(item[0]);
    start = end + 1;
  }
  return items;
}

workloads::MultimodalConfig images_option(const std::string& value) {
  (void)option_list(value, "--images");
  return workloads::parse_images_flag(value);
}

}  // namespace servesim::api
