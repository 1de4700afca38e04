// A pretrained directory's portable name: what an exported PEFT adapter writes as
// base_model_name_or_path, so that it opens on another machine (peft fetches a Hugging Face
// name; a path of the training machine means nothing elsewhere), and how leanback finds that
// name's local copy again when it reads such an adapter.
//
// tools/fetch_pretrained.sh writes the name it fetched into <dir>/.hub_name
// ("sentence-transformers/all-MiniLM-L6-v2" for the MiniLM the GLUE configs use).
#pragma once
#include <string>

namespace lb::train {

inline constexpr const char* kHubNameFile = ".hub_name";

// <dir>/.hub_name's Hugging Face name ("org/model"), or "" where the directory has none. A
// file that does not hold one name of that shape is an error naming it.
std::string hub_name_of(const std::string& dir);

// The directory under $LEANBACK_HOME/models (~/.cache/leanback/models by default) whose
// .hub_name is `name`, or "" where none is.
std::string local_model_for(const std::string& name);

}  // namespace lb::train
