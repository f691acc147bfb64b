// The Markdown table and the JSON file with the raw numbers.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "gst_bench.hpp"

namespace gstbench {
namespace {

std::string fmt(double v, int decimals) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

std::string us_pct(const std::vector<std::uint64_t>& v, double q) {
  return v.empty() ? "-" : fmt(percentile(v, q) / 1000.0, 1);
}

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else {
      o += c;
    }
  }
  return o + "\"";
}

std::string json_number(double v) {
  return std::isfinite(v) ? fmt(v, 3) : "null";
}

std::string json_kv(const Kv& kv) {
  std::string o = "{";
  bool first = true;
  for (const auto& [k, v] : kv) {
    o += (first ? "" : ", ") + json_string(k) + ": " + json_string(v);
    first = false;
  }
  return o + "}";
}

std::string json_array(const std::vector<std::uint64_t>& v) {
  std::string o = "[";
  for (std::size_t i = 0; i < v.size(); ++i) o += (i ? "," : "") + std::to_string(v[i]);
  return o + "]";
}

// Live rows through our elements: each stage's p50 / p99, in the order a frame goes through them.
void print_budget(const std::vector<Row>& rows) {
  bool any = false;
  for (const Row& r : rows) any = any || !r.stages[0].empty();
  if (!any) return;
  std::printf(
      "\nPer-frame budget of the live rows through cudaipcsink/cudaipcsrc, p50 / p99 us "
      "(the p50s need not add up to the total's)\n\n| transport | format | total |");
  for (const char* st : kStages) std::printf(" %s |", st);
  std::printf("\n|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    if (r.stages[0].empty()) continue;
    std::printf("| %s | %s | %s / %s |", r.label.c_str(), r.format.c_str(),
                us_pct(r.lat, 0.5).c_str(), us_pct(r.lat, 0.99).c_str());
    for (const auto& v : r.stages)
      std::printf(" %s / %s |", us_pct(v, 0.5).c_str(), us_pct(v, 0.99).c_str());
    std::printf("\n");
  }
}

}  // namespace

void print_table(const ReportInfo& info, const std::vector<Row>& rows) {
  std::printf(
      "\n%s, %llu frames measured after %llu warm-up frames; %s\n\n"
      "| transport | format | frames recv/sent | lost | bad | frames/s | x producer alone "
      "| latency p50 us | p99 us | meta p50 us | meta p99 us | prod CPU us/f | over alone "
      "| cons CPU us/f | note |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
      info.size.c_str(), static_cast<unsigned long long>(info.frames),
      static_cast<unsigned long long>(info.warmup), info.gst_version.c_str());
  for (const Row& r : rows) {
    if (!r.ran) {
      std::printf("| %s | %s | - | - | - | - | - | - | - | - | - | - | - | - | %s |\n",
                  r.label.c_str(), r.format.c_str(), r.note.c_str());
      continue;
    }
    const bool baseline = r.id.rfind("baseline", 0) == 0;
    // Against the same producer into fakesink in one process (its baseline row).
    const bool compared = !baseline && r.base_fps > 0 && r.fps > 0;
    std::printf(
        "| %s | %s | %llu/%llu | %s | %llu | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s%s |\n",
        r.label.c_str(), r.format.c_str(), static_cast<unsigned long long>(r.received),
        static_cast<unsigned long long>(r.sent), baseline ? "-" : std::to_string(r.lost).c_str(),
        static_cast<unsigned long long>(r.bad), fmt(r.fps, 0).c_str(),
        compared ? fmt(r.fps / r.base_fps, 3).c_str() : "-", us_pct(r.lat, 0.5).c_str(),
        us_pct(r.lat, 0.99).c_str(), us_pct(r.meta, 0.5).c_str(), us_pct(r.meta, 0.99).c_str(),
        fmt(r.prod_cpu_us, 1).c_str(),
        compared ? fmt(r.prod_cpu_us - r.base_prod_cpu_us, 1).c_str() : "-",
        baseline ? "-" : fmt(r.cons_cpu_us, 1).c_str(), r.ok ? "" : "FAILED: ", r.note.c_str());
  }
  print_budget(rows);
  std::fflush(stdout);
}

void write_json(const std::string& path, const ReportInfo& info, const std::vector<Row>& rows) {
  std::ofstream f(path);
  f << "{\n  \"gstreamer\": " << json_string(info.gst_version)
    << ",\n  \"plugin\": " << json_string(info.plugin_file)
    << ",\n  \"machine\": " << json_string(info.machine)
    << ",\n  \"size\": " << json_string(info.size) << ",\n  \"frames\": " << info.frames
    << ",\n  \"warmup\": " << info.warmup << ",\n  \"rows\": [";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    f << (i ? "," : "") << "\n    {\"id\": " << json_string(r.id)
      << ", \"label\": " << json_string(r.label) << ", \"format\": " << json_string(r.format)
      << ", \"ran\": " << (r.ran ? "true" : "false") << ", \"ok\": " << (r.ok ? "true" : "false")
      << ", \"note\": " << json_string(r.note) << ",\n     \"sent\": " << r.sent
      << ", \"received\": " << r.received << ", \"lost\": " << r.lost << ", \"bad\": " << r.bad
      << ", \"checked\": " << r.checked << ", \"fps\": " << json_number(r.fps)
      << ", \"over_source_us\": " << json_number(r.over_source_us)
      << ", \"base_fps\": " << json_number(r.base_fps)
      << ", \"base_prod_cpu_us_per_frame\": " << json_number(r.base_prod_cpu_us)
      << ", \"prod_cpu_us_per_frame\": " << json_number(r.prod_cpu_us)
      << ", \"cons_cpu_us_per_frame\": " << json_number(r.cons_cpu_us)
      << ",\n     \"latency_ns\": " << json_array(r.lat)
      << ",\n     \"meta_latency_ns\": " << json_array(r.meta);
    for (int k = 0; k < 5; ++k) f << ",\n     \"stage" << k << "_ns\": " << json_array(r.stages[k]);
    f << ",\n     \"producer\": " << json_kv(r.producer)
      << ",\n     \"consumer\": " << json_kv(r.consumer) << "}";
  }
  f << "\n  ]\n}\n";
  if (!f) throw std::runtime_error("cannot write " + path);
}

}  // namespace gstbench
