use verso_rpc::RpcMethod;

#[derive(RpcMethod, Debug)]
#[rpc(since = "1.0")]
pub struct Ping {
    pub host: String,
    #[rpc(rename = "host")]
    pub hostname: String,
}

fn main() {}
