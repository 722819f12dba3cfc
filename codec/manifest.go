package codec

import "fmt"

// ManifestVersion is the version of the manifest envelope written by EncodeManifest.
const ManifestVersion = 1

// Manifest points from a KV entry to a snapshot stored as an object (used by
// package snapshot for states too large for one KV value).
type Manifest struct {
	// Object is the object's name in the object store bucket.
	Object string `msgpack:"object"`
	// Digest is the SHA-256 of the object's bytes (the snapshot envelope).
	Digest [32]byte `msgpack:"digest"`
	// Size is the object's size in bytes.
	Size uint64 `msgpack:"size"`
	// LastSeq is the snapshot's last applied input sequence.
	LastSeq uint64 `msgpack:"last_seq"`
	// SnapshotVersion is the envelope version of the object.
	SnapshotVersion int `msgpack:"snapshot_version"`
	// Pipeline, Key and Epoch repeat the snapshot's identity and ownership
	// epoch, so a reader can refuse a manifest of another key, or of a
	// newer epoch, without fetching the object. Omitted when empty (as
	// written by earlier versions).
	Pipeline string `msgpack:"pipeline,omitempty"`
	Key      string `msgpack:"key,omitempty"`
	Epoch    uint64 `msgpack:"epoch,omitempty"`
}

// IsManifest reports whether data starts like a manifest envelope rather
// than a snapshot envelope. It does not validate data.
func IsManifest(data []byte) bool {
	return len(data) >= 4 && data[0] == magic[0] && data[1] == magic[1] && data[2] == magic[2] && data[3] == kindManifest
}

// EncodeManifest encodes m in the manifest envelope (the snapshot framing
// with kind 'M' and version ManifestVersion).
func EncodeManifest(m *Manifest) ([]byte, error) {
	body, err := marshalSorted(m)
	if err != nil {
		return nil, fmt.Errorf("codec: encode manifest: %w", err)
	}
	return frame(make([]byte, 0, headerLen+len(body)), kindManifest, ManifestVersion, body), nil
}

// DecodeManifest decodes an envelope written by EncodeManifest, with the
// errors of DecodeSnapshot.
func DecodeManifest(data []byte) (*Manifest, error) {
	version, body, err := unframe(data, kindManifest, "manifest")
	if err != nil {
		return nil, err
	}
	if version != ManifestVersion {
		return nil, fmt.Errorf("%w: manifest version %d (this build reads %d)", ErrVersion, version, ManifestVersion)
	}
	var m Manifest
	if err := unmarshalStrict(body, &m); err != nil {
		return nil, malformed("manifest body: %v", err)
	}
	if m.Object == "" {
		return nil, malformed("manifest: empty object name")
	}
	return &m, nil
}
