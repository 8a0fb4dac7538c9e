use verso_rpc::RpcMethod;

#[derive(RpcMethod, Debug)]
#[rpc(reply = String)]
pub struct Ping {
    pub host: String,
}

fn main() {}
