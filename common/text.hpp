// Small string helpers shared by every layer: case-insensitive names, joining lists.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace servesim::text {

std::string lower(std::string_view s);
bool iequals(std::string_view a, std::string_view b);
std::string join(const std::vector<std::string>& items, std::string_view sep = ", ");
// Splits "1,2,4" on commas, trimming blanks; empty items are dropped.
std::vector<std::string> split_csv(std::string_view s);
// The offset of the first byte that breaks UTF-8 in `s` (overlong forms and surrogates aside),
// or npos when it is valid.
std::size_t invalid_utf8_at(std::string_view s);

}  // namespace servesim::text
