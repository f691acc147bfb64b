#include "channels.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cudaipc/tensor.hpp"

namespace cudaipc::cli {

std::string default_channel_dir() {
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  if (xdg && *xdg) return std::string(xdg) + "/cudaipc";
  return "/tmp/cudaipc-" + std::to_string(::geteuid());
}

namespace {

// The sockets in `dir`, sorted; a directory we cannot read is reported as one entry that fails.
void list_dir(const std::string& dir, std::vector<std::string>& out, bool quiet_if_missing) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) {
    if (errno == ENOENT && quiet_if_missing) return;
    out.push_back(dir);  // querying it names the cause
    return;
  }
  std::vector<std::string> found;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    const std::string p = dir + "/" + name;
    if (::lstat(p.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) found.push_back(p);
  }
  ::closedir(d);
  std::sort(found.begin(), found.end());
  out.insert(out.end(), found.begin(), found.end());
}

std::string tensor_text(const TensorDesc& t) {
  return to_string(t);
}

std::string format_rate(double r) {
  if (r < 0) return "? frames/s";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f frames/s", r);
  return buf;
}

}  // namespace

std::vector<std::string> find_channels(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  if (args.empty()) {
    list_dir(default_channel_dir(), out, true);
    return out;
  }
  for (const auto& a : args) {
    struct stat st {};
    if (::stat(a.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      list_dir(a, out, false);
    else
      out.push_back(a);
  }
  return out;
}

const char* state_name(ChannelState s) {
  switch (s) {
    case ChannelState::live:
      return "live";
    case ChannelState::stale:
      return "stale";
    case ChannelState::missing:
      return "missing";
    case ChannelState::denied:
      return "denied";
    case ChannelState::busy:
      return "busy";
    case ChannelState::version:
      return "version";
    case ChannelState::error:
      return "error";
  }
  return "error";
}

ChannelView failed_view(const std::string& path, const Error& e) {
  ChannelView v;
  v.path = path;
  v.message = e.what();
  switch (e.code()) {
    case Errc::disconnected: {
      struct stat st {};
      if (::lstat(path.c_str(), &st) != 0) {
        v.state = ChannelState::missing;
        v.message = std::string("no such channel (") + std::strerror(errno) + ")";
      } else if (!S_ISSOCK(st.st_mode)) {
        v.state = ChannelState::error;
        v.message = "not a socket";
      } else if (std::strstr(e.what(), "went away")) {
        v.state = ChannelState::stale;
        v.message = "the producer went away";
      } else {
        v.state = ChannelState::stale;
        v.message = "stale socket: no producer listens (left by one that exited)";
      }
      break;
    }
    case Errc::permission_denied:
      v.state = ChannelState::denied;
      v.message = std::string("permission denied: ") + e.what();
      break;
    case Errc::busy:
      v.state = ChannelState::busy;
      break;
    case Errc::version_mismatch:
      v.state = ChannelState::version;
      break;
    default:
      v.state = ChannelState::error;
  }
  return v;
}

ChannelView query(Monitor& m) {
  try {
    ChannelView v;
    v.path = m.path();
    v.status = m.status();
    v.state = ChannelState::live;
    v.consumer_rates.assign(v.status->consumers.size(), -1);
    return v;
  } catch (const Error& e) {
    return failed_view(m.path(), e);
  }
}

ChannelView query(const std::string& path) {
  try {
    Monitor m(path);
    return query(m);
  } catch (const Error& e) {
    return failed_view(path, e);
  }
}

void add_rates(ChannelView& now, const ChannelView& before) {
  if (!now.status || !before.status) return;
  const double dt = std::chrono::duration<double>(now.status->at - before.status->at).count();
  // A restarted producer starts counting again: no rate across it.
  if (dt <= 0 || now.status->published < before.status->published ||
      now.status->producer_pid != before.status->producer_pid)
    return;
  now.rate = static_cast<double>(now.status->published - before.status->published) / dt;
  for (std::size_t i = 0; i < now.status->consumers.size(); ++i) {
    const auto& c = now.status->consumers[i];
    for (const auto& b : before.status->consumers)
      if (b.id == c.id && b.pid == c.pid && c.delivered >= b.delivered)
        now.consumer_rates[i] = static_cast<double>(c.delivered - b.delivered) / dt;
  }
}

std::string memory_text(const ChannelStatus& s) {
  if (s.memory == MemoryKind::host) return "host";
  std::string t = s.export_mode == CudaExportMode::legacy ? "cuda legacy" : "cuda vmm";
  return t + " device " + std::to_string(s.device);
}

std::string mode_text(ConsumeMode m) {
  return m == ConsumeMode::latest ? "latest" : "every-frame";
}

std::string describe(const ChannelView& v) {
  if (!v.status) return v.path + "  " + state_name(v.state) + ": " + v.message + "\n";
  const ChannelStatus& s = *v.status;
  std::string out = v.path + "  producer pid " + std::to_string(s.producer_pid);
  if (!s.producer_exe.empty()) out += " " + s.producer_exe;
  out += "\n  memory " + memory_text(s) + ", " + std::to_string(s.slot_count) + " slots";
  if (s.generation == 0) {
    out += ", no format yet\n";
  } else {
    out += " of " + std::to_string(s.slot_size) + " bytes, meta " + std::to_string(s.meta_size) +
           " bytes\n  format " +
           (s.format.caps.empty() ? std::string("(no caps)") : s.format.caps) + "  tensor " +
           tensor_text(s.format.tensor) + "  generation " + std::to_string(s.generation) + "\n";
  }
  out += "  published " + std::to_string(s.published) + ", " + format_rate(v.rate) + ", dropped " +
         std::to_string(s.dropped) + ", descriptor refusals " +
         std::to_string(s.descriptor_refusals) + (s.end_of_stream ? ", end of stream" : "") + "\n";
  out += "  consumers " + std::to_string(s.consumers.size()) + " of " +
         std::to_string(s.max_consumers) + ", monitors " + std::to_string(s.monitors) + "\n";
  for (std::size_t i = 0; i < s.consumers.size(); ++i) {
    const auto& c = s.consumers[i];
    out += "    consumer " + std::to_string(c.id) + "  pid " + std::to_string(c.pid) + "  " +
           mode_text(c.mode) + "  lag " + std::to_string(c.lag) + "  leases " +
           std::to_string(c.leases) + "  delivered " + std::to_string(c.delivered) + "  " +
           format_rate(i < v.consumer_rates.size() ? v.consumer_rates[i] : -1) +
           (c.evicted ? "  EVICTED" : "") + "\n";
  }
  return out;
}

void to_json(Json& j, const ChannelView& v) {
  j.begin_object();
  j.field("path", v.path).field("state", state_name(v.state));
  if (!v.status) {
    j.field("error", v.message).end_object();
    return;
  }
  const ChannelStatus& s = *v.status;
  j.begin_object("producer")
      .field("pid", static_cast<std::int64_t>(s.producer_pid))
      .field("exe", s.producer_exe)
      .end_object();
  j.field("memory", s.memory == MemoryKind::host ? "host" : "cuda");
  if (s.memory == MemoryKind::cuda)
    j.field("export", s.export_mode == CudaExportMode::legacy ? "legacy" : "vmm");
  else
    j.null_field("export");
  j.field("device", s.device)
      .field("slots", s.slot_count)
      .field("slot_size", s.slot_size)
      .field("meta_size", s.meta_size)
      .field("max_consumers", s.max_consumers)
      .field("max_leases", s.max_leases)
      .field("generation", s.generation);
  if (s.generation != 0) {
    const TensorDesc& t = s.format.tensor;
    j.field("caps", s.format.caps).begin_object("tensor");
    j.field("dtype", dtype_name(t.dtype) ? dtype_name(t.dtype) : "invalid");
    j.begin_array("shape");
    for (std::uint32_t i = 0; i < t.rank; ++i) j.value(t.shape[i]);
    j.end_array().begin_array("strides");
    for (std::uint32_t i = 0; i < t.rank; ++i) j.value(t.strides[i]);
    j.end_array();
    j.field("byte_offset", t.byte_offset).field("size", t.size).field("planes", t.num_planes);
    j.end_object();
  } else {
    j.null_field("caps").null_field("tensor");
  }
  j.field("published", s.published)
      .field("dropped", s.dropped)
      .field("frames_per_second", v.rate < 0 ? std::nan("") : v.rate)
      .field("descriptor_refusals", s.descriptor_refusals)
      .field("end_of_stream", s.end_of_stream)
      .field("monitors", s.monitors);
  j.begin_array("consumers");
  for (std::size_t i = 0; i < s.consumers.size(); ++i) {
    const auto& c = s.consumers[i];
    const double r = i < v.consumer_rates.size() ? v.consumer_rates[i] : -1;
    j.begin_object()
        .field("id", c.id)
        .field("pid", static_cast<std::int64_t>(c.pid))
        .field("mode", mode_text(c.mode))
        .field("cursor", c.cursor)
        .field("lag", c.lag)
        .field("leases", c.leases)
        .field("delivered", c.delivered)
        .field("skipped", c.skipped)
        .field("frames_per_second", r < 0 ? std::nan("") : r)
        .field("evicted", c.evicted)
        .end_object();
  }
  j.end_array().end_object();
}

}  // namespace cudaipc::cli
