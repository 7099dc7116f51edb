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
// Splits on commas, trimming blanks, keeping empty items in place ("a,,b" is "a", "", "b"): the
// cells of a CSV row keep their columns.
std::vector<std::string> split_cells(std::string_view s);
// The items of an option's comma-separated list, trimmed ("vllm, sglang" is two). An empty item
// (`vllm,,sglang`, a comma first or last) is an Error naming the option, the item and the list;
// a value with no characters but blanks is no items (the caller's default or its own refusal).
std::vector<std::string> option_list(std::string_view value, std::string_view option);
// A CSV field, quoted (RFC 4180) when it holds a comma, a quote or a line break.
std::string csv_field(std::string_view s);
// The offset of the first byte that breaks UTF-8 in `s` (overlong forms and surrogates aside),
// or npos when it is valid.
std::size_t invalid_utf8_at(std::string_view s);

}  // namespace servesim::text
