#include "shardproof/report/Report.h"
#include "shardproof/support/Error.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace shardproof::report {

// The rename is atomic on POSIX file systems, so a reader (or a failed run)
// sees either the old file or the complete new one, never half of it.
llvm::Error writeFileAtomically(const std::string &requested, const std::string &text) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // A symlink is followed: the file it names is replaced, the link stays.
  std::string path = requested;
  if (fs::is_symlink(fs::symlink_status(requested, ec))) {
    auto target = fs::weakly_canonical(requested, ec);
    if (ec)
      return userError("cannot write '" + requested + "': " + ec.message());
    path = target.string();
  }
  // A device or pipe (/dev/stdout, /dev/full, a FIFO) is written in place:
  // renaming a file over it would replace the node itself.
  auto st = fs::status(path, ec);
  if (!ec && fs::exists(st) && !fs::is_regular_file(st)) {
    std::ofstream f(path, std::ios::binary);
    if (!f)
      return userError("cannot write '" + requested + "': " + std::strerror(errno));
    if (!(f << text) || !f.flush())
      return userError("cannot write '" + requested + "': write failed (" + std::strerror(errno) + ")");
    return llvm::Error::success();
  }
  // Per process, so two runs writing the same file do not share a temporary.
  std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f)
      return userError("cannot write '" + path + "': " + std::strerror(errno));
    if (!(f << text) || !f.flush()) {
      f.close();
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      return userError("cannot write '" + path + "': write failed");
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return userError("cannot write '" + path + "': " + ec.message());
  }
  return llvm::Error::success();
}

llvm::Error checkNotAnInput(const std::string &path, const std::vector<std::string> &inputs) {
  if (path.empty())
    return llvm::Error::success();
  std::error_code ec;
  for (const std::string &in : inputs)
    if (std::filesystem::equivalent(path, in, ec))
      return userError("cannot write '" + path + "': it is an input of this run ('" + in +
                       "'); choose another output path");
  return llvm::Error::success();
}

llvm::Error checkWritable(const std::string &path) {
  if (path.empty())
    return llvm::Error::success();
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec))
    return userError("cannot write '" + path + "': it is a directory");
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty())
    dir = ".";
  if (!fs::is_directory(dir, ec))
    return userError("cannot write '" + path + "': directory '" + dir.string() + "' does not exist");
  if (::access(dir.c_str(), W_OK) != 0)
    return userError("cannot write '" + path + "': directory '" + dir.string() + "' is not writable (" +
                     std::strerror(errno) + ")");
  return llvm::Error::success();
}

} // namespace shardproof::report
