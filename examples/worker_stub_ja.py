"""worker.py: ラボの課題です。各関数を実装してから、次のように採点します。

    python grade.py --impl path/to/worker.py --lang ja

下の関数は、どれも契約だけで採点されます。採点に使うのは、実際にクラッシュし、あなたの
ファイルを開き直す本物のプロセスです。配布した状態では、どの関数もNotImplementedErrorを
送出するので、採点ツールのチェックはすべて理由を示して失敗します。使えるのは標準ライブラリ
だけです。下のシグネチャが契約で、採点ツールはあなたの関数をちょうどこの引数で呼び出します
（キット独自の追加分、durability=、require_digest=、before_send=、on_failure=、intake_manyは、
契約に含まれません）。
採点ツールはDBを自分で読むので、次のテーブルを守ってください。
受付DB（source DB）：`orders(id, ...)` と `outbox(seq, event_id, payload, sent, ...)`。
`sent` は0か1、`seq` は INTEGER PRIMARY KEY AUTOINCREMENT（再利用しません）、`payload` は
イベントのJSON（id・sku・qtyを持つオブジェクト1つ）です。
倉庫DB（sink DB）：`inbox(event_id, ...)`、`inventory(sku, qty)`（skuごとに1行）、
`deliveries(event_id, outcome, ...)`。`deliveries` は配信1回につき1行で、到着順に並びます。
両方のDBをWALモードにし、返す接続はどれもsynchronous=FULLかEXTRAにします。
例外はクラス名で判定します。DeliveryError、Conflict、WrongDatabaseという名前のクラスを
定義（またはimport）し、ValueErrorとKeyErrorを使ってください。
すべての規則と、それを強制するチェックはdocs/rules.ja.mdにあります。採点ツールのリリース
ごとにワーカーに求めることがどう変わったかは、CHANGELOG.md（英語）にあります。このスタブは
examples/worker_stub.pyと同じもので、docstringだけを日本語にしています。
"""


def validate_event(event):
    """キーがちょうどid・sku・qtyの新しいdictを返します。無効なら、フィールド名を示すValueErrorを送出します。

    idとsku: A-Z a-z 0-9 . _ : - からなる1–64文字のstrで、先頭は英字か数字。
    qty: 1から1,000,000までのint。boolは、ここではintとして認めません。
    引数そのものは変更しないでください。
    """
    raise NotImplementedError("validate_event")


def init_store(path):
    """受付DB（orders、outbox）を開くか作成し、sqlite3.Connectionを返します。

    outbox.seqは受付の順序を記録します（INTEGER PRIMARY KEY AUTOINCREMENT）。WALモードにし、
    返す接続はsynchronous=FULL（またはEXTRA）にします。新しいファイルとは、存在しないファイル、
    隣に-walのない0バイトのファイル、テーブルのないSQLiteファイルのことです。それ以外で、
    あなたの受付DBではないファイル（倉庫DB、テキストファイル、別のアプリケーションのDB）には
    WrongDatabaseという名前の例外クラスを送出し、ファイルとその-walを1バイトも変えずに
    残します。何かを書き込む前に（PRAGMAの設定も書き込みです）まず中身を確かめてください。
    相手側がまだDBを開いていて、テーブルが-walにしかないこともあります。SQLiteを通して
    （mode=ro）確かめ、ファイルの大きさやimmutable=1で判断してはいけません。
    """
    raise NotImplementedError("init_store")


def intake(con, event):
    """注文の行と、未完了のoutboxの行を、1つのトランザクションで書き込み、seqを返します。

    まず検証します。無効なイベントはValueErrorを送出し、何も書き込みません。
    返すのはoutboxの行のseq（int）で、seqは再利用しません。
    同じIDで同じイベントをもう一度受け付けたら、既存のseqを返し、何も書き込みません。
    同じIDで別のイベント（どのフィールドが違っても、skuだけでも）なら、Conflictという名前の
    例外クラスを送出し、何も書き込みません。
    """
    raise NotImplementedError("intake")


def pending(con, limit=16):
    """未完了のイベント（キーがちょうどid・sku・qtyのdict）を、seqの順に最大limit件返します。何も変えません。

    limit: 1から16までのint（boolは不可）。それ以外はValueErrorです。トランザクションを
    開いたまま残さないでください。照会のコストが、完了した行の数につれて増えてはいけません。
    未完了の行だけを持つインデックスを用意します
    （CREATE INDEX ... ON outbox(seq) WHERE sent = 0）。
    """
    raise NotImplementedError("pending")


def mark_sent(con, event_id):
    """そのoutboxの行に、専用のトランザクションで完了印を付けます。変わればTrue、すでに完了ならFalseを返します。

    印を付けるのはその行だけで、戻る前にコミットします。未知のIDにはKeyErrorを送出します。
    """
    raise NotImplementedError("mark_sent")


def dispatch(con, send, limit=16, *, after_delivery=None):
    """未完了のイベントを最大limit件の1バッチとして、seqの順に送ります。完了印を付けた件数を返します。

    項目に完了印を付けるのは、send(copy)がちょうどTrueを返したときだけです。そのあと、
    after_deliveryがあればafter_delivery(copy)を呼び、それから自分が選んだIDでmark_sentを
    呼びます。`send` と `after_delivery` は、選ばれたイベントのコピー（`id`・`sku`・`qty` を持つ
    新しいdict）をそれぞれ自分専用に受け取ります。`dispatch` は自分が選んだIDで完了印を付けるので、
    コピーを書き換えても何も変わりません。
    最初の失敗で止まり、元の例外オブジェクトをそのまま伝えます。True以外の結果は例外にします。
    sendの実行中はトランザクションを開きません。その呼び出しで完了印を付けた件数を返します。
    """
    raise NotImplementedError("dispatch")


def send_http(url, event, *, timeout=5.0):
    """イベントをJSONでhttp://<loopback>[:port]/eventsにPOSTし、確認できるACKならTrueそのものを返します。

    それ以外のURL（別のホスト、https、/events/を含む別のパス、ユーザー情報、クエリ、
    フラグメント）は、ソケットを作る前、名前を引く前に拒否します（ValueError）。loopbackとは、
    大文字小文字を問わないlocalhost、127.a.b.c（各0–255で先頭の0なし。127.000.0.1、
    127.0.0.256、127.1は不可）、[::1]のことです。ポートは先頭の0なしの1–65535か、
    省略（80）です。空のポートとポート0は拒否します。プロキシは使わず、リダイレクトにも従いません。
    timeoutは読み取り1回ごとではなく、やり取り全体の上限です。1バイトずつ応答する倉庫にも、
    それより長く引き止められてはいけません。
    確認できるACKとは、ステータスがちょうど200で、本文が4 KiB以下（4,096バイトは可）のJSON
    オブジェクトであり、"ack": true と、送ったIDと等しい"id"を持つものです（ほかのキーは無視し、
    "digest"は確かめなくて構いません）。それ以外はすべて、クラス名がDeliveryErrorの例外
    （またはそれを継承した例外）を送出します。
    """
    raise NotImplementedError("send_http")


def init_sink(path):
    """倉庫DB（inbox、inventory、deliveries）を開くか作成し、sqlite3.Connectionを返します。

    WALモードにし、返す接続はsynchronous=FULL（またはEXTRA）にします。新しいファイルと拒否の
    規則はinit_storeと同じです。受付DB、テキストファイル、別のアプリケーションのDBには
    WrongDatabaseを送出し、ファイルとその-walを変えずに残します。
    """
    raise NotImplementedError("init_sink")


def receive(con, event):
    """イベントを最大1回だけ適用し、"applied"か"duplicate"そのものを返します。

    まず検証します。無効なイベントはValueErrorを送出し、何も書き込みません。
    すべてを1つのトランザクションで行います。新しいIDなら、そのskuの在庫にqtyを加え（同じskuの
    2件は足し合わされます）、IDをinboxに記録します。既知のIDで同じペイロードなら、配信記録
    （deliveries）のほかは何も変えません。既知のIDで別のペイロード（どのフィールドが違っても、
    skuだけでも）なら、衝突を記録して先にコミットし、そのあとでConflictという名前の例外クラスを
    送出します。有効なイベントでの呼び出しは、どれもdeliveriesに1行を記録します
    （outcomeはapplied、duplicate、conflictのどれか）。
    """
    raise NotImplementedError("receive")
