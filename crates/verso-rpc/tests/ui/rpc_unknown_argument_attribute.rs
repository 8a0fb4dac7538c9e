use verso_rpc::RpcMethod;

#[derive(RpcMethod, Debug)]
#[rpc(since = "1.0")]
pub struct Ping {
    #[rpc(optional)]
    pub host: String,
}

fn main() {}
