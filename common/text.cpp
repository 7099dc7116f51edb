#include "common/text.hpp"

#include <cctype>

#include "common/error.hpp"

namespace servesim::text {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

std::vector<std::string> split_cells(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string_view::npos) end = s.size();
    std::string_view item = s.substr(start, end - start);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) item.remove_prefix(1);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.remove_suffix(1);
    out.emplace_back(item);
    start = end + 1;
  }
  return out;
}

std::vector<std::string> option_list(std::string_view value, std::string_view option) {
  bool blank = true;
  for (const char c : value) blank &= std::isspace(static_cast<unsigned char>(c)) != 0;
  if (blank) return {};   // no value at all: the caller's default, or its own "is empty"
  std::vector<std::string> items = split_cells(value);
  for (std::size_t n = 0; n < items.size(); ++n)
    if (items[n].empty())
      throw Error(std::string(option), "",
                  "item " + std::to_string(n + 1) + " of '" + std::string(value) +
                      "' is empty; give the values separated by single commas, with none before the first or after the last");
  return items;
}

std::vector<std::string> split_csv(std::string_view s) {
  std::vector<std::string> out = split_cells(s);
  std::erase_if(out, [](const std::string& item) { return item.empty(); });
  return out;
}

std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string o = "\"";
  for (char ch : s) o += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return o + "\"";
}

std::size_t invalid_utf8_at(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (std::size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    if (!ok) return i;
    i += n;
  }
  return std::string_view::npos;
}

}  // namespace servesim::text
