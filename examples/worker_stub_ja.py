"""worker.py: ラボの課題です（examples/worker_stub.py と同じ契約で、説明を日本語にしたものです）。各関数を実装し、

    python grade.py --impl path/to/worker.py --lang ja

で採点します。

下の関数は、どれも契約だけで採点されます。採点ツールは実際にプロセスをクラッシュさせ、
あなたのファイルを新しいプロセスで開き直します。配布した状態では、どの関数も
NotImplementedError を送出するので、採点ツールのチェックはすべて理由付きで失敗します。
使えるのは標準ライブラリだけです。採点ツールはDBを自分で読むので、次のテーブルを守ってください。
受付DB（source DB）: `orders(id, ...)` と `outbox(seq, event_id, payload, sent, ...)`。
`sent` は0か1、`payload` はイベントのJSON（id・sku・qtyを持つオブジェクト1つ）です。
倉庫DB（sink DB）: `inbox(event_id, ...)`、`inventory(sku, qty)`、`deliveries(event_id, outcome, ...)`。
`deliveries` は配信1回につき1行で、到着順に並びます。
両方のDBをWALモードにし、返す接続はどれも synchronous=FULL にします。
例外はクラス名で判定します。DeliveryError、Conflict、WrongDatabase という名前のクラスを
定義（またはimport）し、ValueError と KeyError を使ってください。
採点ツールのリリースごとにワーカーに求めることが変わった点は、CHANGELOG.md にあります。
"""


def validate_event(event):
    """キーがちょうど id・sku・qty の新しいdictを返します。不正なら、フィールド名を示す ValueError を送出します。

    id と sku: A-Z a-z 0-9 . _ : - からなる1–64文字のstrで、先頭は英字か数字。
    qty: 1から1,000,000までのint。boolは、ここではintとして認めません。
    """
    raise NotImplementedError("validate_event")


def init_store(path):
    """受付DB（orders、outbox）を開くか作成し、sqlite3.Connection を返します。

    outbox.seq は受付の順序を記録します（INTEGER PRIMARY KEY AUTOINCREMENT）。WALモードにし、
    返す接続は synchronous=FULL にします。倉庫DBや、そのほかあなたの受付DBではないファイルには、
    WrongDatabase という名前の例外クラスを送出し、ファイルを1バイトも変えずに残します。
    書き込む前に、PRAGMA ひとつでも、まず中身を確かめてください。
    """
    raise NotImplementedError("init_store")


def intake(con, event):
    """注文の行と、未完了のoutboxの行を、1つのトランザクションで書き込み、seqを返します。

    同じIDで同じイベントをもう一度受け付けたら、既存のseqを返し、何も書き込みません。
    同じIDで別のイベントなら、Conflict という名前の例外クラスを送出します。
    """
    raise NotImplementedError("intake")


def pending(con, limit=16):
    """未完了のイベント（id・sku・qtyのdict）を、seqの順に最大 limit 件返します。何も変えません。

    limit: 1から16までのint（boolは不可）。それ以外は ValueError です。照会のコストが、
    完了した行の数につれて増えてはいけません。未完了の行だけを持つインデックスを用意します
    （CREATE INDEX ... ON outbox(seq) WHERE sent = 0）。
    """
    raise NotImplementedError("pending")


def mark_sent(con, event_id):
    """そのoutboxの行に、専用のトランザクションで完了印を付けます。変わればTrue、すでに完了ならFalse。

    未知のIDには KeyError を送出します。
    """
    raise NotImplementedError("mark_sent")


def dispatch(con, send, limit=16, *, after_delivery=None):
    """未完了のイベントの1バッチを、seqの順に送ります。完了印を付けた件数を返します。

    項目に完了印を付けるのは、send(copy) がちょうど True を返したときだけです。そのあと、
    after_delivery があれば after_delivery(copy) を呼び、それから、自分で選んだID
    （sendが見たdictのIDではなく）で mark_sent を呼びます。最初の失敗で止まり、元の例外を
    そのまま伝えます。True以外の結果は例外にします。send の実行中はトランザクションを開きません。
    """
    raise NotImplementedError("dispatch")


def send_http(url, event, *, timeout=5.0):
    """イベントをJSONで http://<loopback>[:port]/events にPOSTし、確認できるACKならTrueを返します。

    それ以外のURL（別のホスト、https、別のパス、ユーザー情報、クエリ、フラグメント）は、ソケットを
    作る前、名前を引く前に拒否します（ValueError）。プロキシは使わず、リダイレクトにも従いません。
    timeout は読み取り1回ごとではなく、やり取り全体の上限です。1バイトずつ応答する倉庫にも、
    それより長く引き止められてはいけません。
    確認できるACKとは、ステータスが200で、本文が4 KiB以下のJSONオブジェクトであり、
    "ack": true と、送ったIDと等しい "id" を持つものです。それ以外はすべて、クラス名が
    DeliveryError の例外（またはそれを継承した例外）を送出します。
    """
    raise NotImplementedError("send_http")


def init_sink(path):
    """倉庫DB（inbox、inventory、deliveries）を開くか作成し、sqlite3.Connection を返します。

    WALモードにし、返す接続は synchronous=FULL にします。受付DBや、そのほかあなたの倉庫DBでは
    ないファイルには WrongDatabase を送出し、ファイルは変えません。
    """
    raise NotImplementedError("init_sink")


def receive(con, event):
    """イベントを高々1回だけ適用し、"applied" か "duplicate" を返します。

    すべてを1つのトランザクションで行います。新しいIDなら、そのskuの在庫にqtyを加え、IDをinboxに
    記録します。既知のIDで同じペイロードなら、配信記録（deliveries）のほかは何も変えません。
    既知のIDで別のペイロードなら、衝突を記録して先にコミットし、そのあとで Conflict という名前の
    例外クラスを送出します。有効なイベントでの呼び出しは、どれも deliveries に1行を記録します
    （outcome は applied、duplicate、conflict のどれか）。
    """
    raise NotImplementedError("receive")
