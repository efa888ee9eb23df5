// to_junit, junit_error: JUnit XML through pugixml (report.h). Every text and attribute is
// escaped by the library; names are UTF-8 (the CLI checks paths and scenario text first).

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <pugixml.hpp>
#include <sstream>

#include "harness/record/schema.h"
#include "harness/report/report.h"

namespace mtp::report {
namespace {

/// True iff code point `c` is a Char of XML 1.0 (§2.2): a parser rejects the document otherwise,
/// raw or as a character reference.
bool xml_char(uint32_t c) {
  return c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) ||
         (c >= 0xE000 && c <= 0xFFFD) || (c >= 0x10000 && c <= 0x10FFFF);
}

/// The serialized document with every character XML 1.0 forbids — raw (a control byte from an
/// expectation's `why`, U+FFFE, a byte of invalid UTF-8) or as the reference pugixml writes for
/// a control character ("&#27;") — written as the visible text "\xNN" / "\uNNNN".
std::string xml_chars_only(const std::string& doc) {
  std::string out;
  out.reserve(doc.size());
  for (size_t i = 0; i < doc.size();) {
    if (doc.compare(i, 2, "&#") == 0) {  // pugixml's references are decimal: &#NN;
      size_t j = i + 2;
      uint32_t c = 0;
      while (j < doc.size() && j < i + 10 && std::isdigit(static_cast<unsigned char>(doc[j]))) {
        c = c * 10 + static_cast<uint32_t>(doc[j++] - '0');
      }
      if (j > i + 2 && j < doc.size() && doc[j] == ';' && !xml_char(c)) {
        out += fmt::format("\\x{:02x}", c);
        i = j + 1;
        continue;
      }
    }
    const auto b = static_cast<unsigned char>(doc[i]);
    const size_t n = b < 0x80           ? 1
                     : (b >> 5) == 0x6  ? 2
                     : (b >> 4) == 0xE  ? 3
                     : (b >> 3) == 0x1E ? 4
                                        : 0;
    uint32_t c = n == 1 ? b : n == 2 ? b & 0x1F : n == 3 ? b & 0x0F : b & 0x07;
    bool ok = n > 0 && i + n <= doc.size();
    for (size_t k = 1; ok && k < n; ++k) {
      const auto cb = static_cast<unsigned char>(doc[i + k]);
      ok = (cb & 0xC0) == 0x80;
      c = (c << 6) | (cb & 0x3F);
    }
    // Overlong forms and surrogates are not UTF-8 either.
    ok = ok && !(n == 2 && c < 0x80) && !(n == 3 && c < 0x800) && !(n == 4 && c < 0x10000) &&
         !(c >= 0xD800 && c <= 0xDFFF);
    if (!ok) {
      out += fmt::format("\\x{:02x}", b);
      ++i;
    } else if (!xml_char(c)) {
      out += c < 0x100 ? fmt::format("\\x{:02x}", c) : fmt::format("\\u{:04X}", c);
      i += n;
    } else {
      out.append(doc, i, n);
      i += n;
    }
  }
  return out;
}

std::string to_string(const pugi::xml_document& doc) {
  std::ostringstream out;
  doc.save(out, "  ", pugi::format_default, pugi::encoding_utf8);
  return xml_chars_only(out.str());
}

pugi::xml_node suite(pugi::xml_document& doc, const std::string& name) {
  pugi::xml_node decl = doc.prepend_child(pugi::node_declaration);
  decl.append_attribute("version") = "1.0";
  decl.append_attribute("encoding") = "UTF-8";
  pugi::xml_node suites = doc.append_child("testsuites");
  suites.append_attribute("name") = name.c_str();
  pugi::xml_node s = suites.append_child("testsuite");
  s.append_attribute("name") = name.c_str();
  return s;
}

}  // namespace

std::string to_junit(const scenario::Scenario& sc, const std::vector<ExpectationResult>& results) {
  pugi::xml_document doc;
  pugi::xml_node s = suite(doc, sc.name);
  int tests = 0, failures = 0, skipped_count = 0;
  double seconds = 0.0;
  for (const auto& r : results) {
    const std::string classname = sc.name + "." + r.expectation->name;
    if (r.skipped && !r.undecided) {
      // The test cases an evaluation would have had: each pair with the baseline, or for the
      // oracle each variant against oracle/<group>.
      std::vector<std::pair<std::string, std::string>> cases;
      const auto& e = *r.expectation;
      if (e.oracle()) {
        for (const auto& v : e.variants) {
          for (const record::Group g :
               {record::Group::kLoss, record::Group::kGrad, record::Group::kWeight}) {
            const std::string name = record::group_name(g);
            const auto& groups = e.selection.groups;
            if (std::find(groups.begin(), groups.end(), name) != groups.end()) {
              cases.emplace_back(v, "oracle/" + name);
            }
          }
        }
      } else if (e.judge == scenario::Judge::kReplicas) {
        for (const auto& v : e.variants) {
          cases.emplace_back(v, record::group_name(record::Group::kCopies));
        }
      } else {
        for (size_t i = 1; i < e.variants.size(); ++i) {
          cases.emplace_back(e.variants[0], e.variants[i]);
        }
      }
      for (const auto& [a, b] : cases) {
        pugi::xml_node tc = s.append_child("testcase");
        tc.append_attribute("classname") = classname.c_str();
        tc.append_attribute("name") = fmt::format("{}/{}_vs_{}", e.name, a, b).c_str();
        tc.append_attribute("time") = "0";
        tc.append_child("skipped").append_attribute("message") = r.skip_reason().c_str();
        ++tests;
        ++skipped_count;
      }
      continue;
    }
    for (const auto& p : r.pairs) {
      pugi::xml_node tc = s.append_child("testcase");
      tc.append_attribute("classname") = classname.c_str();
      tc.append_attribute("name") =
          fmt::format("{}/{}_vs_{}", r.expectation->name, p.baseline, p.other).c_str();
      tc.append_attribute("time") = fmt::format("{:.3f}", p.seconds).c_str();
      ++tests;
      seconds += p.seconds;
      if (p.undecided) {
        ++skipped_count;
        tc.append_child("skipped").append_attribute("message") = pair_verdict(p).c_str();
      } else if (!p.holds) {
        ++failures;
        pugi::xml_node f = tc.append_child("failure");
        f.append_attribute("message") = fmt::format("{} vs {} ({}): {}", p.baseline, p.other,
                                                    r.expectation->class_text(), pair_verdict(p))
                                            .c_str();
        f.append_attribute("type") = r.expectation->class_text().c_str();
        f.text().set(fmt::format("why it should hold: {}\n{}", r.expectation->why,
                                 compare::format_report(p.result, p.baseline, p.other))
                         .c_str());
      } else {
        tc.append_child("system-out").text().set(pair_verdict(p).c_str());
      }
    }
  }
  s.append_attribute("tests") = tests;
  s.append_attribute("failures") = failures;
  s.append_attribute("errors") = 0;
  s.append_attribute("skipped") = skipped_count;
  s.append_attribute("time") = fmt::format("{:.3f}", seconds).c_str();
  return to_string(doc);
}

std::string junit_error(const std::string& suite_name, const std::string& message) {
  pugi::xml_document doc;
  pugi::xml_node s = suite(doc, suite_name);
  s.append_attribute("tests") = 1;
  s.append_attribute("failures") = 0;
  s.append_attribute("errors") = 1;
  s.append_attribute("skipped") = 0;
  s.append_attribute("time") = "0";
  pugi::xml_node tc = s.append_child("testcase");
  tc.append_attribute("classname") = suite_name.c_str();
  tc.append_attribute("name") = "check";
  tc.append_attribute("time") = "0";
  pugi::xml_node e = tc.append_child("error");
  e.append_attribute("message") = message.c_str();
  e.append_attribute("type") = "bad input or failure before any expectation ran";
  e.text().set(message.c_str());
  return to_string(doc);
}

}  // namespace mtp::report
