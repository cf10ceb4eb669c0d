// Package sessionserver gives an in-process bttest server the session data
// plane of cloud.google.com/go/bigtable v1.58.0, which bttest lacks (its
// OpenTable answers Unimplemented), so that a raw client with sessions on
// can be measured and tested against the same storage as one with sessions
// off. It is a pair of gRPC server interceptors (Server.ServerOptions) to
// install on a bttest server (bttest.NewServer, or bttestharness's
// Config.ServerOptions):
//
//   - GetClientConfiguration is answered with Config.SessionLoad and the
//     session pool's bounds: the client's ClientConfigurationManager polls
//     it at start (internal/transport/client_configuration_manager.go) and
//     its Diverter then sends that share of eligible calls to sessions
//     (internal/transport/diverter.go);
//   - an OpenTable stream is served as the client drives it
//     (internal/transport/session_lifecycle.go, session_vrpc.go): an
//     OpenSessionRequest whose payload is an OpenTableRequest, answered with
//     OpenSessionResponse and a SessionParametersResponse carrying
//     Config.KeepAlive; then VirtualRpcRequests, one at a time (the
//     client's multiplexing limit is 1, session.go), each answered with a
//     VirtualRpcResponse or an ErrorResponse of the same rpc_id; a
//     CloseSessionRequest ends the stream;
//   - a virtual ReadRow (TableRequest.read_row) is the backend's ReadRows of
//     that one key with the request's filter, its chunks merged into the
//     Row of a SessionReadRowResponse (none when the row has no cells); a
//     virtual MutateRow is the backend's MutateRow. Both call the bttest
//     service the interceptor wraps, directly: the classic RPCs and the
//     virtual ones reach the same storage with no extra hop.
//
// Every other call goes to bttest unchanged. Stats counts the calls of
// each plane, so a test can prove which one a call took.
//
// The wire protocol follows the client's own test server
// (integration_session_fake_server_test.go and
// integration_session_harness_test.go in the module): it is what the
// client of that version sends and accepts, not Cloud Bigtable's
// documented contract (the session protos are marked "Internal usage
// only"). Not modelled: heartbeats (the announced keep-alive is longer than
// any call served here, so the client's watchdog, which runs only while a
// call is in flight, never needs one), GoAway, the peer-info header,
// authorized and materialized views (their Open streams reach bttest,
// which answers Unimplemented, and the client falls back to the classic
// RPCs), a session's read or write permission (not enforced). Virtual
// calls do not pass the interceptors installed after these ones
// (bttestharness's read/write gate among them): a test that reads a row
// through sessions while another goroutine adds columns to it can meet
// bttest's torn read (docs/emulators.md#quirks).
//
// A client reaches the session plane only when it dials the server itself
// (option.WithEndpoint and dial options): one given a connection
// (option.WithGRPCConn, or BIGTABLE_EMULATOR_HOST, which makes one)
// builds no session client (client.go, preDialed), nor does one with
// ClientConfig.DisableSession.
package sessionserver
