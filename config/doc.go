// Package config loads the configuration of "kpcastream run": one YAML file
// (strict: an unknown field is an error), then environment variables, then
// command-line flags, with precedence flags > env > file > defaults. It
// hands each package its own Config: processor.Config (with its pipelines
// and their learners.Config) and snapshot.Config. There is one model: the
// file decodes straight into those structs (their yaml tags name the
// fields), and config adds only what is its own (nats, embedded, log,
// http, data_dir). Validation reports every problem at once (errors.Join),
// each a *FieldError naming its field by YAML path, e.g.
// "config: pipelines[0].learner.components: must be ≤ budget (3), got 5":
// each package's Validate names its fields relative to its struct and
// config puts them under their place in the file (fielderr.Prefix), so
// no message is parsed.
// Decoding errors name the field too, with the line the YAML decoder gives
// and the value in the file's terms ("config: pipelines[0].learner.dim:
// line 7: \"x\" is not an integer"; an unknown or duplicate key is named itself); only a syntax
// error, or a file that is not one mapping, is named by its line alone
// ("config: yaml: line 3: …"). An unknown field is named by its YAML path
// with the closest known field and the mapping's fields ("config: nats.ulr:
// line 2: unknown field "ulr"; did you mean "url"? (nats has url, name,
// …)"). The file holds one YAML document: a second one, or trailing text,
// is an error. Read never panics; FuzzRead checks these rules on arbitrary
// input.
//
// Its one reason to change is the configuration file: its fields, defaults,
// environment expansion and checks.
//
// # Environment variables in the file
//
// Before the YAML is parsed, its raw text is searched for references to
// environment variables, as Redpanda Connect (Benthos) does:
//
//	${VAR}           the value of VAR; VAR unset is an error naming it
//	${VAR:default}   the value of VAR, or default when VAR is unset or empty
//	$${              a literal "${" ($${VAR} reads ${VAR})
//
// VAR is letters, digits and _, not starting with a digit; a default is
// any text without "}". Lines whose first non-blank character is "#"
// (comments) are left alone. The value is inserted as text, so it is read
// as YAML: quote a reference whose value may hold YAML syntax (password:
// "${NATS_PASSWORD}"). Every bad reference is reported with its line
// ("config: substitution: line 3: ${MY_NATS}: environment variable MY_NATS
// is not set …"), before anything else. The commands look the variables
// up in the whole environment (Overrides.Env), the NATS_* variables
// included.
//
// Only cmd imports config. See examples/kpcastream.yaml for a complete file.
//
// The nats.* settings are resolved by the commands (internal/natsconn), with
// a nats CLI context between the environment and the file: flag > env >
// context (--context, NATS_CONTEXT) > file. "kpcastream run" therefore reads
// the file without the NATS_* environment and lets natsconn apply it.
//
// # An RSS target
//
// process_memory (bytes, top level; 0, the default: none) is a target for
// the process's resident memory, memory_budget staying what the learners
// get. Validate refuses pipelines whose memory_budget (or, where a worker's
// share is under one key, what its keys hold) sum to more than
// (process_memory − 32 MiB for the binary − 64 MiB base) / 2, naming the
// field, the sum, the ceiling and the least process_memory that fits; "kpcastream
// run" keeps Go's soft memory limit at process_memory less the file pages
// the process has resident (the binary, the local tier's mapped reads; at
// least 1.5 × Σ memory_budget + 64 MiB), unless GOMEMLIMIT is set
// (processor.ProcessMemory, processor.GovernProcessMemory). With the
// embedded server its memory counts in the process and no budget sizes it.
// A file without it runs as before (README, "An RSS target").
//
// # Fields
//
// Durations are Go durations ("500ms", "30s", "2m"). A field left out takes
// its default.
//
//	field                                 unit / values              default                 env / flag
//	nats.url                              comma-separated URLs, each [nats|tls|ws|wss://][user[:pass]@]host[:port]  "" (embedded server)    NATS_URL, KPCASTREAM_NATS_URL / --nats-url
//	nats.name                             client name                kpcastream
//	nats.creds                            credentials file           ""                      NATS_CREDS
//	nats.nkey                             nkey seed file             ""                      NATS_NKEY
//	nats.user, nats.password              user/password auth         ""                      NATS_USER, NATS_PASSWORD
//	nats.token                            token auth                 ""                      NATS_TOKEN
//	nats.tls.ca                           PEM root CAs file          ""                      NATS_CA
//	nats.tls.cert, nats.tls.key           PEM client cert and key    ""                      NATS_CERT, NATS_KEY
//	nats.reconnect_wait                   duration (reconnects forever) 2s
//	embedded.host                         listen host                127.0.0.1
//	embedded.port                         port (-1 = any free)       4222                    KPCASTREAM_EMBEDDED_PORT
//	embedded.store_dir                    directory                  <data_dir> (store in its jetstream/)
//	data_dir                              directory                  kpcastream-data         KPCASTREAM_DATA_DIR / --data-dir
//	log.format                            json | console | ""        "" (console on a tty)   KPCASTREAM_LOG_FORMAT / --log-format
//	log.level                             debug|info|warn|error      info                    KPCASTREAM_LOG_LEVEL
//	http.metrics_addr                     host:port or "off"         127.0.0.1:9090          KPCASTREAM_METRICS_ADDR / --metrics-addr
//	process_memory                        bytes: RSS target of the process (external server; README, Sizing memory)  0 (none)
//	snapshots.bucket                      KV bucket                  kpcastream-snapshots
//	snapshots.object_bucket               Object Store bucket        kpcastream-state
//	snapshots.replicas                    1..5                       1
//	snapshots.max_inline                  bytes                      min(max_payload−4KiB, 900KiB)
//	snapshots.history                     revisions per key, 1..64   1
//	workers                               goroutines                 GOMAXPROCS
//	queue_size                            messages per worker queue  64
//	shutdown_timeout                      duration per shutdown step 10s
//	service_name                          NATS micro service name    kpcastream
//	checkpoint_bucket                     KV bucket of members, partition records, checkpoints  kpcastream-checkpoints
//	checkpoint_every                      duration                   5s
//	checkpoint_replicas                   replicas of the checkpoint bucket, 1..5  snapshots.replicas
//	lease_ttl                             duration, ≥ 30ms (partition ownership, records renewed every ttl/6)  10s
//	on_lease_held                         deprecated: accepted, ignored  wait
//	snapshot_timeout                      duration per store call    10s
//	local_dir                             directory of the local tier below memory_budget (none: off)  <data_dir>/local
//	pipelines[i].name                     [A-Za-z0-9_-]+             required
//	pipelines[i].input.stream             JetStream stream name      "" (core NATS input)
//	pipelines[i].input.subject            subject filter             required
//	pipelines[i].input.create_stream      bool                       false
//	pipelines[i].input.replicas           created stream, 1..5       1
//	pipelines[i].input.max_age            created stream, duration   0 (no limit)
//	pipelines[i].input.max_bytes          created stream, bytes      0 (no limit)
//	pipelines[i].input.durable            consumer name              kpcastream-<name>
//	pipelines[i].input.max_ack_pending    messages                   256
//	pipelines[i].input.ack_wait           duration                   30s
//	pipelines[i].input.nak_delay          duration (transient errors) 1s
//	pipelines[i].input.queue_group        core NATS queue group      ""
//	pipelines[i].input.shards             streams the partitions spread over, 1..partitions (> 1: <stream>-<s>, a server mapping partitions; README, Sharding)  1
//	pipelines[i].input.shard_tags         placement tags of each created shard stream (one list per shard)  none (the cluster places them)
//	pipelines[i].key_token                subject token index (0-based) first '*' token; none → one key "_"
//	pipelines[i].learner.kind             ikpca|kha|window|batch     ikpca
//	pipelines[i].learner.dim              input dimension d          required
//	pipelines[i].learner.components       k, 1 ≤ k ≤ budget          required
//	pipelines[i].learner.budget           stored points B            256
//	pipelines[i].learner.kernel.name      rbf|poly|linear|sigmoid|laplacian  required
//	pipelines[i].learner.kernel.gamma     > 0                        1/d
//	pipelines[i].learner.kernel.degree    poly degree 1..32          3
//	pipelines[i].learner.kernel.coef0     poly/sigmoid offset        0
//	pipelines[i].learner.forget           factor in (0, 1]           1 (no forgetting)
//	pipelines[i].learner.admission        ald | coherence            ald
//	pipelines[i].learner.eviction         centroid | lli | fifo | contribution  centroid
//	pipelines[i].learner.tolerance        ALD ν in (0, 1)            1e-3
//	pipelines[i].learner.swap_ratio       lli hysteresis, ≥ 1        2
//	pipelines[i].learner.coherence        μ₀ in (0, 1)               0.95
//	pipelines[i].learner.jitter           in (0, 1)                  1e-10
//	pipelines[i].learner.learning_rate    kha η₀                     0.1
//	pipelines[i].learner.decay            kha t₀ (observations)      1000
//	pipelines[i].learner.rule             kha: gha | oja | apex      gha (oja: refresh ≤ k)
//	pipelines[i].learner.beta             kha gha β of eq. (12), > 0 1 (Sanger)
//	pipelines[i].learner.gain             kha: et | smd (gha, β 1)   et
//	pipelines[i].learner.dictionary       kha: first | kmeans        first
//	pipelines[i].learner.refresh          observations               ikpca 2(k+max(k,8)), window max(2k, W/40), kha max(1, k/2)
//	pipelines[i].learner.seed             uint64                     0
//	pipelines[i].output.subject           template ({pipeline},{key},{shard}: a stream per shard) kpca.out.{pipeline}.{key}
//	pipelines[i].output.encoding          json | msgpack | ""        "" (the input's)
//	pipelines[i].output.stream            stream name                ""
//	pipelines[i].output.create_stream     bool                       false
//	pipelines[i].output.replicas          created stream, 1..5       1
//	pipelines[i].output.max_age           created stream, ≥ duplicates  0 (no limit)
//	pipelines[i].output.max_bytes         created stream, bytes      0 (no limit)
//	pipelines[i].output.duplicates        dedupe window, ≥ 100ms     2m
//	pipelines[i].output.window            unacknowledged outputs a partition, 1..65536  256
//	pipelines[i].output.key_in_flight     outputs of a key in flight, 1..window (> 1: ordered fast-batch lane where the stream allows batches)  128 (at most window)
//	pipelines[i].dead_letter              template ({pipeline},{key},{shard}) kpca.dlq.{pipeline}
//	pipelines[i].dead_letters.stream      stream name ({pipeline})   KPCA_DLQ_{pipeline}
//	pipelines[i].dead_letters.create_stream  bool (unless a stream captures the subjects)  true
//	pipelines[i].dead_letters.replicas    created stream, 1..5       1
//	pipelines[i].dead_letters.max_age     created stream, duration (< 0: none)  168h
//	pipelines[i].dead_letters.max_bytes   created stream, bytes (< 0: none)     1073741824 (1 GiB)
//	pipelines[i].snapshot.every_messages  messages (< 0 disables)    1000
//	pipelines[i].snapshot.every           duration (< 0 disables)    30s
//	pipelines[i].snapshot.on_shutdown     bool                       true
//	pipelines[i].snapshot.on_corrupt_snapshot  fail | reset          fail
//	pipelines[i].memory_budget            bytes of live learners on an instance (lint: keys that fit)  268435456 (256 MiB)
//	pipelines[i].max_keys                 live learners, an optional cap below memory_budget (0 none)  0
//	pipelines[i].max_batch                observations per message   1024
//	pipelines[i].partitions               1..1024 (JetStream input; fixed with the stream's transform)  1
//	pipelines[i].classifier.classes       ≥ 2 unique names (ikpca or kha)  none (no classifier stage)
//	pipelines[i].classifier.ridge         λ > 0, units of k(x,x)     0.1
//	pipelines[i].classifier.forget        β in (0, 1] per label      1
//	pipelines[i].classifier.loss          squared | hinge            squared
//	pipelines[i].classifier.window        labelled predictions behind the accuracy metric  1000
//	pipelines[i].monitor.level            limits' level in (0, 1)    0.99 (no monitor: section → no monitoring)
//	pipelines[i].monitor.learn            always | normal (with the trend gate: README, Monitoring)  always
//	pipelines[i].monitor.warmup           rows known to be normal, learned first  2·budget, 100..200
//	pipelines[i].monitor.accept_after     consecutive alarmed observations (0 never)  0
//	pipelines[i].monitor.confirm          observations, 1..4096      10
//	pipelines[i].monitor.window           normal observations behind the limits, 2..2²⁰  10/(1 − level), ≥ 100
//	pipelines[i].monitor.trend            ewma | off (learn normal's trend gate)  ewma
//	pipelines[i].monitor.trend_lambda     EWMA weight in (0, 1]      2/(n + 1), n = 1/(1 − level)
//	pipelines[i].monitor.excursion        alarms learned as a normal excursion, ≤ 4096 (negative none)  50
//	pipelines[i].monitor.linear           bool: a linear residual beside the kernel's (dim 2..512)  true for dim 2..128
//	pipelines[i].preprocess.standardize   bool                       false
//	pipelines[i].preprocess.freeze        bool (needs standardize)   true when learner.forget is 1, else false
package config
