//! Generates the region servers' gRPC service (`basalt.RegionServer`) and its client with
//! tonic's manual builder: the messages are Rust types encoded with postcard
//! (`rpc::codec::PostcardCodec`), so no `.proto` file and no `protoc` are needed.

fn main() {
    let codec = "crate::rpc::codec::PostcardCodec";
    let service = tonic_build::manual::Service::builder()
        .name("RegionServer")
        .package("basalt")
        .comment("A region server: every operation of the client's `Backend` seam.")
        .method(
            tonic_build::manual::Method::builder()
                .name("call")
                .route_name("Call")
                .comment("One operation (anything but a scan), answered by one reply.")
                .input_type("crate::rpc::messages::Request")
                .output_type("crate::rpc::messages::Reply")
                .codec_path(codec)
                .build(),
        )
        .method(
            tonic_build::manual::Method::builder()
                .name("scan")
                .route_name("Scan")
                .comment("A scan, answered by a stream of pages of rows.")
                .input_type("crate::rpc::messages::ScanRequest")
                .output_type("crate::rpc::messages::ScanPage")
                .codec_path(codec)
                .server_streaming()
                .build(),
        )
        .build();
    tonic_build::manual::Builder::new()
        .build_transport(false)
        .compile(&[service]);
}
