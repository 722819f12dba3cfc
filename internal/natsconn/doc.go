// Package natsconn is the one NATS connection layer of every kpcastream
// subcommand: the same flags (--context, --nats-url, --creds, --nkey,
// --user, --password, --token, --tlsca, --tlscert, --tlskey), the same
// environment variables (NATS_CONTEXT, NATS_URL, NATS_CREDS, …), natscli's
// context files, and one precedence: flag > environment > context >
// configuration file. It also owns the redaction of secrets from every URL
// and error it prints: a password or token given in a URL never reaches a
// log line or an error message.
//
// Contexts are the files of the nats CLI (ADR-21): the context NAME is
// $XDG_CONFIG_HOME/nats/context/NAME.json (default ~/.config/nats), the
// selected one is named in ~/.config/nats/context.txt. The fields read are
// url, user, password, token, creds, nkey, cert, key and ca (creds and nkey
// as file paths or file:// URIs); other fields are ignored.
//
// Its one reason to change is how a command finds and authenticates its NATS
// connection.
package natsconn
