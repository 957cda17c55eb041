// The text of a tensor's values (tensor/value_text.hpp).
#include "tensor/value_text.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

namespace sw::text {

std::vector<std::vector<int64_t>> shown_coordinates(const std::vector<int64_t>& extents, const Summary& s) {
  // A zero-size tensor has no elements but can still have many brackets
  // ((5000, 0) is 5000 "[]"): it counts the rows before its first empty
  // dimension instead.
  int64_t count = 1;
  bool big = false;
  for (int64_t e : extents) {
    if (e == 0) break;
    if (__builtin_mul_overflow(count, e, &count)) big = true;
  }
  big = big || count > s.threshold;
  std::vector<std::vector<int64_t>> shown(extents.size());
  for (size_t d = 0; d < extents.size(); ++d) {
    const int64_t e = extents[d];
    std::vector<int64_t>& v = shown[d];
    if (big && e > 2 * s.edge) {
      for (int64_t i = 0; i < s.edge; ++i) v.push_back(i);
      v.push_back(kCut);
      for (int64_t i = e - s.edge; i < e; ++i) v.push_back(i);
    } else {
      for (int64_t i = 0; i < e; ++i) v.push_back(i);
    }
  }
  return shown;
}

int64_t shown_count(const std::vector<std::vector<int64_t>>& shown) {
  int64_t n = 1;
  for (const std::vector<int64_t>& v : shown) n *= static_cast<int64_t>(std::count_if(v.begin(), v.end(), [](int64_t c) {
    return c != kCut;
  }));
  return n;
}

std::string float32_text(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

namespace {

struct Writer {
  const std::vector<std::vector<int64_t>>& shown;
  const std::vector<std::string>& texts;
  size_t indent;
  const Summary& s;
  size_t width = 0;  // of the widest element text
  size_t next = 0;   // the next element text
  std::string out;

  std::string item(const std::string& t) const {
    return t.size() >= width ? t : std::string(width - t.size(), ' ') + t;
  }

  void row(size_t d) {
    const size_t start_col = indent + d + 1;
    size_t col = start_col;
    bool first = true;
    for (int64_t c : shown[d]) {
      const std::string t = c == kCut ? std::string("...") : item(texts.at(next++));
      if (!first) {
        out += ',';
        ++col;
        if (col + 1 + t.size() + 1 > s.width) {  // +1: the ',' or ']' after it
          out += '\n';
          out.append(start_col, ' ');
          col = start_col;
        } else {
          out += ' ';
          ++col;
        }
      }
      out += t;
      col += t.size();
      first = false;
    }
  }

  void block(size_t d) {
    out += '[';
    if (d + 1 == shown.size()) {
      row(d);
    } else {
      bool first = true;
      for (int64_t c : shown[d]) {
        if (!first) {
          out += ',';
          out.append(shown.size() - d - 1, '\n');  // a blank line between blocks of rank >= 3
          out.append(indent + d + 1, ' ');
        }
        if (c == kCut)
          out += "...";
        else
          block(d + 1);
        first = false;
      }
    }
    out += ']';
  }
};

}  // namespace

std::string nested_text(const std::vector<std::vector<int64_t>>& shown, const std::vector<std::string>& texts,
                        size_t indent, const Summary& s) {
  if (static_cast<int64_t>(texts.size()) != shown_count(shown))
    throw std::invalid_argument("nested_text: the texts do not match the shown coordinates");
  if (shown.empty()) return texts.at(0);
  Writer w{shown, texts, indent, s, 0, 0, std::string()};
  for (const std::string& t : texts) w.width = std::max(w.width, t.size());
  w.block(0);
  return w.out;
}

}  // namespace sw::text
