// Package csvin reads numeric rows from the CSV files that "kpcastream
// publish" and "kpcastream replay" take as input, with one set of rules for
// both commands:
//
//   - The file is RFC 4180 CSV as encoding/csv reads it: a leading UTF-8 byte
//     order mark is skipped, lines starting with '#' are comments, leading
//     space before a field is ignored, and every row has as many fields as
//     the first.
//   - The first row is a header of column names. With Options.HeaderOptional
//     (publish) a first row in which no field is a number is a header and
//     any other first row is data, so the columns have no names.
//   - Options.Drop names columns to leave out and Options.ID a column whose
//     text is each row's id; both take a header name or, failing that, a
//     0-based index. The kept columns, in file order, are the vector.
//   - Every kept field, trimmed of spaces, must parse with
//     strconv.ParseFloat to a finite number, and an id must be valid UTF-8
//     (codec rejects anything else, so a row is rejected here with its line
//     and column rather than later as a whole message).
//
// Errors name the file (Options.Name), the line and, for a bad field, its
// column: the 1-based position of the field in the row (dropped columns
// count, as in the file) and the column's header name, or without a header
// its 0-based index as --drop and --id-column take it: `line 3, column 3
// ("c")`, `line 3, column 3 (index 2)`. A CSV syntax error names the
// 1-based byte position in the line instead ("byte 5"). A Reader holds one row at a
// time and is not safe for concurrent use.
//
// Its one reason to change is the rules for reading numeric CSV input.
package csvin
