use verso_rpc::RpcMethod;

#[derive(RpcMethod, Debug)]
#[rpc(since = "1.0.1")]
pub struct Ping {
    pub host: String,
}

fn main() {}
