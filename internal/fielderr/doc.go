// Package fielderr is the one error type of configuration problems: a
// problem of one field, named by its YAML path. Every package with a
// configuration struct (learners, learners/classify, snapshot, processor,
// config) validates it into *Error values whose paths are relative to that
// struct; a struct that holds another one puts the inner problems under
// the field's own path with Prefix. So the file's path of a problem is
// built up layer by layer and never parsed back out of a message.
//
// It imports the standard library only, so that every layer, learners
// included, can use it.
//
// Its one reason to change is how a configuration problem names its field.
package fielderr
