// The tokenizer: how raw text becomes terms, one implementation for
// `tributary convert`, documents that carry raw text (Document.text, read by
// DocumentDecoder: the server, WAL replay, every stream reader) and the
// language bindings. Changing what it produces changes which term a word
// becomes: models trained on text keep working only if it is stable, so a
// change is a new tokenizer version (kTokenizerVersion).
#ifndef TRIBUTARY_TOKENIZER_H_
#define TRIBUTARY_TOKENIZER_H_

#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace tributary {

// Appends to *tokens the lowercase runs of letters and digits of `text`: ASCII
// letters are lowercased; bytes >= 0x80 (UTF-8) count as letters so
// non-English words stay whole; every other byte separates tokens.
void Tokenize(std::string_view text, std::vector<std::string>* tokens);

// A small, standard English stop-word list (lowercase, apostrophe-free forms,
// matching what Tokenize() produces: "don't" -> "don", "t").
const std::unordered_set<std::string>& EnglishStopWords();

}  // namespace tributary

#endif  // TRIBUTARY_TOKENIZER_H_
