#include "common/csv.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include "common/error.hpp"
#include "common/text.hpp"

namespace servesim::text {

CsvRecords::CsvRecords(std::string text, std::string file) : t_(std::move(text)), file_(std::move(file)) {
  if (t_.rfind("\xEF\xBB\xBF", 0) == 0) pos_ = 3;
}

bool CsvRecords::next(std::vector<std::string>& out, int& line) {
  for (;;) {
    if (pos_ >= t_.size()) return false;
    out.clear();
    line = line_;
    std::string cur;
    bool quoted = false, any = false;
    while (pos_ < t_.size()) {
      const char c = t_[pos_++];
      if (quoted) {
        if (c == '"' && pos_ < t_.size() && t_[pos_] == '"') cur += '"', ++pos_;
        else if (c == '"') quoted = false;
        else {
          if (c == '\n' || (c == '\r' && (pos_ >= t_.size() || t_[pos_] != '\n'))) ++line_;
          cur += c;
        }
        continue;
      }
      if (c == '"') quoted = any = true;
      else if (c == ',') out.push_back(std::move(cur)), cur.clear(), any = true;
      else if (c == '\r' || c == '\n') {
        if (c == '\r' && pos_ < t_.size() && t_[pos_] == '\n') ++pos_;
        ++line_;
        break;
      } else {
        cur += c;
        any = true;
      }
    }
    if (quoted) throw Error(file_, "line " + std::to_string(line), "unterminated quoted field (a quote opened here is never closed)");
    if (!any) continue;   // a blank line
    out.push_back(std::move(cur));
    for (const auto& f : out)
      if (text::invalid_utf8_at(f) != std::string::npos)
        throw Error(file_, "line " + std::to_string(line), "invalid UTF-8 in field '" + std::string(f.begin(), f.begin() + long(std::min<std::size_t>(
                                                                f.size(), text::invalid_utf8_at(f)))) + "...'; save the file as UTF-8");
    return true;
  }
}

bool decimal(const std::string& s) {
  if (s.empty() || !(std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '.' || s[0] == '-' || s[0] == '+')) return false;
  return s.find_first_not_of("0123456789.eE+-") == std::string::npos;
}

}  // namespace servesim::text
