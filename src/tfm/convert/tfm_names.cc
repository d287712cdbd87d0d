#include "tfm/convert/tfm_names.h"

#include "tfm/convert/files.h"
#include "tfm/core/error.h"
#include "tfm/io/safetensors.h"

namespace tfm::internal::convert {

namespace fs = std::filesystem;

ImportedModel import_tfm_names(const fs::path& folder) {
  TFM_CHECK(fs::is_directory(folder), "{}: not a directory", folder.string());
  ImportedModel m;
  m.config = read_ordered_json(folder / "config.json");
  TFM_CHECK(m.config.is_object(), "{}: not a JSON object", (folder / "config.json").string());
  const SafeTensors st = read_safetensors(folder / "model.safetensors");
  for (const std::string& name : st.names) m.parameters.emplace_back(name, st.tensors.at(name));
  const fs::path table = folder / "vocab.json";
  const nlohmann::ordered_json vocab = read_ordered_json(table);
  try {
    m.pieces = vocab.at("pieces").get<std::vector<std::string>>();
    m.source_eos = vocab.value("source_eos", false);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not an id table: {}", table.string(), one_line(e.what()));
  }
  m.source_spm = read_bytes(folder / "source.spm");
  m.target_spm = read_bytes(folder / "target.spm");
  return m;
}

}  // namespace tfm::internal::convert
