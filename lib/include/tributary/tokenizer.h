// The tokenizer: how raw text becomes terms, one implementation for
// `tributary convert`, documents that carry raw text (Document.text, read by
// DocumentDecoder: the server, WAL replay, every stream reader) and the
// language bindings. Changing what it produces changes which term a word
// becomes: models trained on text keep working only if it is stable, so a
// change is a new tokenizer version (kTokenizerVersion). docs/tokenizer.md
// describes the rules and their trade-offs.
#ifndef TRIBUTARY_TOKENIZER_H_
#define TRIBUTARY_TOKENIZER_H_

#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace tributary {

/// The version of what Tokenize() produces. Any change that can turn some input
/// into different tokens (a rule, a character class, the normalisation form,
/// the stop-word list) is a new version, so that a model trained on one
/// version's terms is never silently fed another's.
///   1  ASCII only: ASCII letters lowercased, [a-z0-9] and every byte >= 0x80
///      are word bytes, everything else separates.
///   2  Unicode (utf8proc): NFKC_Casefold, words are runs of letters, marks and
///      numbers, scripts written without spaces split into characters,
///      invalid UTF-8 separates. ASCII text tokenizes exactly as in version 1.
/// The Unicode character data come from the utf8proc library linked in
/// (TokenizerUnicodeVersion()). A newer Unicode version changes the tokens of
/// text with characters the older one left unassigned (and, rarely, of those
/// whose general category it revises): the version to record with a model is
/// the pair (kTokenizerVersion, TokenizerUnicodeVersion()).
constexpr int kTokenizerVersion = 2;

/// Appends to *tokens the words of `text` (UTF-8), each normalised to
/// NFKC_Casefold: "Straße" -> "strasse", "ＡＢＣ" -> "abc", "ﬁne" -> "fine".
/// A word is a maximal run of letters and numbers (Unicode general categories
/// L* and N*) with the combining marks (M*) that follow them; every other
/// character separates words: spaces, punctuation (apostrophes included:
/// "don't" -> "don", "t"), symbols, emoji, controls, and every byte that is not
/// part of valid UTF-8. Han ideographs, Hiragana, Thai, Lao, Khmer and Myanmar
/// letters are one token each (with their marks): those scripts do not put
/// spaces between words and finding the words needs a dictionary (a Katakana
/// run is one word, as in UAX #29). On ASCII input the result is that of
/// kTokenizerVersion 1.
/// Every token appended is non-empty, valid UTF-8, and tokenizes to itself.
/// Never fails; *tokens is only appended to. Thread-safe (the scratch buffers
/// are per thread).
void Tokenize(std::string_view text, std::vector<std::string>* tokens);

/// The Unicode version of the character data Tokenize() uses (utf8proc's), e.g.
/// "15.0.0".
const char* TokenizerUnicodeVersion();

/// A small, standard English stop-word list (lowercase, apostrophe-free forms,
/// matching what Tokenize() produces: "don't" -> "don", "t").
const std::unordered_set<std::string>& EnglishStopWords();

}  // namespace tributary

#endif  // TRIBUTARY_TOKENIZER_H_
