// Output directories leanback writes (run, compare, predict, export): the one place that decides
// whether a directory may be written into, replaced or cleared, and what may be deleted.
//
// The rule (never destroy what is not ours): a directory leanback creates, or finds empty,
// gets a marker file (kOutputMarker, naming its kind and recording, before each write, the
// names leanback writes there). Only a directory holding the marker of the right kind may be
// replaced with --overwrite, and even then only the entries its marker records are deleted
// (config.json, checkpoint-<N>/ with its three files, plots/loss.png, ...; never by a pattern
// such as *.png); anything else is kept and listed, and so is a directory holding a marker
// of its own unless the record names it as this directory's export or comparison run. "/", the home directory, the current
// directory and every ancestor of it are never an output directory. Removal never follows
// a symbolic link: a link is removed as a link, its target is never entered.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "lb/core/error.h"

namespace lb::train {

// A refused output directory (exists and is not ours, protected, or --overwrite missing):
// callers that branch on it catch this type, never a message substring.
class OutputRefused : public Error {
 public:
  explicit OutputRefused(const std::string& msg) : Error(msg) {}
};

enum class OutputKind { Run, Compare, Predict, Export };
const char* output_kind_name(OutputKind kind);

inline constexpr const char* kOutputMarker = ".leanback-output.json";

// Throws OutputRefused when `dir` (symbolic links resolved) is "/", $HOME, the current
// directory or one of its ancestors. `flag` names the option in the message ("--out").
void refuse_protected_dir(const std::filesystem::path& dir, const std::string& flag);

// The kind the directory's marker names; nullopt without a (readable) marker.
std::optional<OutputKind> output_marker(const std::filesystem::path& dir);
// Writes the marker (atomically); the directory must exist.
void write_output_marker(const std::filesystem::path& dir, OutputKind kind);

// True when `dir` is missing or an empty directory (a file there is refused).
bool output_dir_fresh(const std::filesystem::path& dir, const std::string& flag);

// Deletes, inside `dir` (which must hold the marker of `kind`), the entries its marker records
// (a marker from before the record: the kind's fixed names), never following links; returns
// the entries it kept (not leanback's). The marker stays: the directory is still provably
// leanback's.
std::vector<std::string> remove_owned_entries(const std::filesystem::path& dir, OutputKind kind);

// "--overwrite: kept N entries of DIR that leanback did not write: a b/ ...".
std::string kept_entries_note(const std::filesystem::path& dir, const std::vector<std::string>& kept);

// Adds `names` (relative to `dir`, '/'-separated: "config.json", "checkpoint-12",
// "plots/loss.png") to the record in the marker of `dir`, before they are written; nothing
// happens in a directory without a marker (leanback deletes nothing there). forget_written
// takes names out again (a checkpoint deleted by retention); was_written asks the record.
void record_written(const std::filesystem::path& dir, const std::vector<std::string>& names);
void forget_written(const std::filesystem::path& dir, const std::vector<std::string>& names);
bool was_written(const std::filesystem::path& dir, const std::string& name);

// Whether a training run may use `dir`: resume_ckpt is the checkpoint being resumed ("" when
// starting afresh). Returns true when an old run there is to be replaced (--overwrite on a
// marked run directory; the caller clears it with remove_owned_entries once everything else
// is validated), false when the directory is new, empty, or holds the checkpoint being
// resumed (another run's directory is judged as for a new run). Throws
// OutputRefused otherwise, saying why and what to do.
bool run_dir_verdict(const std::filesystem::path& dir, const std::filesystem::path& resume_ckpt, bool overwrite);
// Creates `dir` (parents too) as an output directory of `kind` and writes its marker if it
// has none; errors name the directory and the system's reason.
void create_output_dir(const std::filesystem::path& dir, OutputKind kind, const std::string& flag);

// Deletes a checkpoint directory leanback wrote (checkpoint-<N> or a killed save's leftover,
// in a directory holding the run marker; anything else is kept): its model, optimizer and state files, then
// the directory if nothing else is in it (else it is kept, with what it holds named in the
// returned text; "" when all is gone). A link is removed as a link.
std::string remove_checkpoint_dir(const std::filesystem::path& dir);

}  // namespace lb::train
