// Command kpcastream is the online kernel PCA stream processor.
//
//	kpcastream run --config FILE       start the workers (embedded NATS unless a URL is given)
//	kpcastream demo                    embedded NATS, one pipeline and a drifting synthetic stream
//	kpcastream publish ...             publish vectors from a CSV file or stdin
//	kpcastream tail ...                outputs or dead letters as JSON lines, whatever their encoding
//	kpcastream dlq ls|republish ...    stored dead letters: list them, re-publish them after a fix
//	kpcastream snapshot ls|show|rm ... the learners' snapshots of a pipeline
//	kpcastream key show|accept|reset . a key's model, accept its regime, reset it (through the workers)
//	kpcastream replay ...              offline replay of a CSV file through a learner, no NATS
//	kpcastream bench ...               end-to-end benchmark
//	kpcastream lint --config FILE      check a configuration file
//	kpcastream project ...             apply a model export to a CSV file
//	kpcastream version, --version      the binary's version
//	kpcastream help CMD, CMD -h        the flags and examples of a command
//	kpcastream completion bash|zsh|fish  a shell completion script
//
// Each subcommand lives in its own file and registers itself in commands.
//
// Its one reason to change is the command line: its commands, flags, messages
// and exit codes (the work itself is in the packages it calls).
package main
