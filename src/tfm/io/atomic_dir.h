// Directories replaced all or nothing (a model directory, a checkpoint): the new one is built
// complete beside the target, then renamed into place, so that a reader never sees a mix of old and
// new files, and a failed write (a full disk) leaves the old directory as it was.
#pragma once

#include <filesystem>
#include <string_view>

namespace tfm::internal {

// "<dir>.<tag>-<pid>" beside `dir` (e.g. "model.partial-4242"): a name of this process's own.
std::filesystem::path sibling_path(const std::filesystem::path& dir, std::string_view tag);

// Makes `built` (a complete directory on the same file system) `target`. An existing target is
// renamed aside to sibling_path(target, "deleting") first and removed once the new one is in
// place; the parent directory is fsynced after the renames. A crash between the two renames
// leaves no `target`, only the two complete directories beside it.
void replace_directory(const std::filesystem::path& built, const std::filesystem::path& target);

// fsync of a directory, making renames in it durable. Ignores failures: some file systems cannot.
void sync_directory(const std::filesystem::path& dir);

}  // namespace tfm::internal
